"""The command line: ready line, --script preload, refused arguments with exact messages."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from busbar_mock_provider.process import MockProcess

CMD = [sys.executable, "-m", "busbar_mock_provider"]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*CMD, *args], capture_output=True, text=True, timeout=30)


def test_script_file_preloads_rules(tmp_path: Path) -> None:
    script = tmp_path / "rules.json"
    script.write_text(
        json.dumps({"rules": [{"match": {"protocol": "openai"}, "times": 2, "response": {"status": 503}}]})
    )
    with MockProcess(script=script) as mock:
        assert mock.url.startswith("http://127.0.0.1:") and mock.port > 0
        assert mock.pending_rules()[0]["times"] == 2
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        codes = [
            mock.client.post(
                "/v1/chat/completions", json=body, headers={"authorization": "Bearer k"}
            ).status_code
            for _ in range(3)
        ]
        assert codes == [503, 503, 200]


def test_invalid_script_file_exits_2(tmp_path: Path) -> None:
    script = tmp_path / "bad.json"
    script.write_text(json.dumps({"rules": [{"response": {"hang": "yes"}}]}))
    res = _run("--port", "0", "--script", str(script))
    assert res.returncode == 2
    assert (
        res.stderr
        == f"busbar-mock-provider: --script {script}: rules[0].response.hang: 'yes' is not a boolean\n"
    )
    assert res.stdout == ""


def test_non_loopback_refused() -> None:
    res = _run("--host", "0.0.0.0", "--port", "0")
    assert res.returncode == 2
    assert res.stderr == (
        "busbar-mock-provider: --host 0.0.0.0: not a loopback address; "
        "pass --allow-non-loopback to listen there\n"
    )


def test_console_script_is_installed() -> None:
    exe = Path(sys.executable).with_name("busbar-mock-provider")
    res = subprocess.run([str(exe), "--help"], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0
    for flag in ("--host", "--port", "--script", "--fixtures", "--no-auth", "--log-level"):
        assert flag in res.stdout
