"""Plugin high-water marks across a fleet (busbar.loader.highwater.check_fleet_marks): with a shared
store the marks live in the store too, so a node whose plugins.dir holds an older release than the
fleet has loaded is refused at boot, exactly as a node's own marks file refuses it; a boot records
the versions it loaded."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.fleet.conftest import ENV, fleet_yaml, read_store
from tests.support.gateway import BusbarProcess, free_port

BUSBAR = str(Path(sys.executable).parent / "busbar")
NAMES = ["plugins.high_water.busbar-store-postgres", "plugins.high_water.busbar-store-sqlite",
         "plugins.high_water.busbar-store-valkey"]


def test_a_boot_records_the_fleet_marks_and_a_lower_release_is_refused(tmp_path: Path, mock, plugins_dir: Path,
                                                                        store_config) -> None:
    module, settings = store_config("postgres")
    text = fleet_yaml(module, settings, mock.url, plugins_dir)
    gw = BusbarProcess(text, tmp_path, env=ENV).start(timeout=60)
    gw.stop()
    assert read_store(module, settings, "get_meta", *NAMES) == dict.fromkeys(NAMES, "1.5.0")

    read_store(module, settings, "put_meta", NAMES[0], "9.0.0")      # another node loaded 9.0.0
    cfg = tmp_path / "config.yaml"
    cfg.write_text(text.replace("{port}", str(free_port())))
    run = lambda env: subprocess.run([BUSBAR, "--config", str(cfg)], capture_output=True, text=True,  # noqa: E731
                                     timeout=60, cwd=tmp_path, env={**os.environ, **ENV, "BUSBAR_LOG": "error",
                                                                    **env})
    r = run({})
    assert r.returncode == 2
    tarball = plugins_dir / "busbar-store-postgres-1.5.0.tar.gz"
    assert r.stderr.splitlines() == [
        f"{tarball}: downgrade from 9.0.0 to 1.5.0 of 'busbar-store-postgres' refused (9.0.0 is the highest version "
        f"this fleet has loaded, recorded in the store); install 9.0.0 or newer, or allow it for one boot with "
        f"BUSBAR_ALLOW_DOWNGRADE=busbar-store-postgres",
        "busbar: 1 plugin(s) below the fleet's high-water mark; refusing to start"]
    assert read_store(module, settings, "get_meta", NAMES[0]) == {NAMES[0]: "9.0.0"}   # nothing written

    gw = BusbarProcess(text, tmp_path, env={**ENV, "BUSBAR_ALLOW_DOWNGRADE": "busbar-store-postgres"}).start(timeout=60)
    gw.stop()                                                         # allowed once: the mark follows
    assert read_store(module, settings, "get_meta", NAMES[0]) == {NAMES[0]: "1.5.0"}
