"""``${NAME}`` environment interpolation over the raw config text, before YAML parsing.

What lives here: :func:`interpolate` (and :func:`interpolate_and_parse`, which also hands back the
parsed document so the loader need not parse twice) plus :class:`InterpolationError`. What must not:
secret references (``{ env: VAR }`` / ``{ file: ... }`` are resolved by :mod:`busbar.config.secrets`
after parsing; they are NOT interpolation), schema checks, file I/O.

Rules (docs/security.md#5-var-interpolation-structure-preserving):

- Only the brace form ``${NAME}`` is expanded; bare ``$NAME`` is passed through unchanged. ``NAME`` is
  letters, digits and ``_``, not starting with a digit. The whole raw text is scanned, comments
  included: a ``${VAR}`` in a commented-out line must still resolve.
- Every fault is collected, then raised once as :class:`InterpolationError`, one line per fault,
  ``<file>:<line>: <message>``:

  ==================================================  ===============================================
  situation                                           message
  ==================================================  ===============================================
  ``${NAME}`` with NAME unset                         ``unset environment variable: NAME``
  ``${NAME`` with no ``}`` on that line               ``unclosed variable reference '${NAME' at column
                                                      C (no closing '}' on that line)``
  ``${}``                                             ``empty variable name in ${}``
  ``${9X}``, ``${A:-b}``                              ``invalid variable name in ${A:-b}: ...``
  value holds \\n \\r \\t NUL DEL, any C0/C1 control  ``environment variable NAME contains a control
  (incl. U+0085), U+2028 or U+2029                    character (U+000A); ...`` (never the value)
  substitution changes the YAML shape                 ``the value of ${TOKENS} changes the YAML
                                                      structure at auth.client_tokens (sequence length
                                                      1 -> 2); use a { file: ... } secret reference
                                                      instead``
  substituted text is not YAML                        ``invalid YAML after substituting ${X}: ...``
  the template itself is not YAML                     ``invalid YAML: ...``
  ==================================================  ===============================================

- Structural equivalence: the template is rendered twice, once with the real values and once with an
  inert alphanumeric placeholder for every reference; both are parsed (``yaml.safe_load`` semantics,
  compared on the composed node graph so duplicate keys count) and must agree on node kind (map /
  sequence / scalar) at every position, map entry count and non-interpolated key names, and sequence
  length. Scalar contents and inferred types may differ (``port: ${PORT}`` -> int is fine). The
  variable(s) responsible are found by re-rendering with one real value at a time.
- A config with no ``${`` costs one substring search: no parse, no copy.

Source: docs/security.md#5-var-interpolation-structure-preserving (syntax, error cases, structural-equivalence check),
"Startup validation summary" (``${VAR}`` unset, ``${}`` or unclosed ``${``).
"""
from __future__ import annotations

import bisect
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from busbar.config.errors import ConfigError

__all__ = ["InterpolationError", "interpolate", "interpolate_and_parse"]

# Exactly the loader ``yaml.safe_load`` uses: libyaml's CSafeLoader accepts some inputs the pure-Python
# parser rejects (``[ 0? ]``), and the check must judge the document the config loader will actually read.
_Loader: type = yaml.SafeLoader
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
# The rest of a reference: up to a '}' or a line break (YAML 1.1 line breaks, as PyYAML counts them).
_TAIL = re.compile(r"[^}\n\r\x85\u2028\u2029]*")
_LINE_BREAK = re.compile(r"\r\n|[\n\r\x85\u2028\u2029]")
# C0, DEL, C1 (incl. U+0085 NEL), LINE SEPARATOR, PARAGRAPH SEPARATOR.
_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# Quoted fragments of PyYAML messages that may echo a substituted value; token names ('<scalar>') and
# single characters (',', '?') are kept: they say what broke without saying what the value is.
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")
_KEEP = re.compile(r"(['\"])(?:<[a-z ]+>|.?)\1\Z", re.S)


def _redact(msg: str) -> str:
    return _QUOTED.sub(lambda m: m.group() if _KEEP.match(m.group()) else "'…'", msg)
_FILE_HINT = "use a { file: ... } secret reference instead"


class InterpolationError(ConfigError):
    """``${VAR}`` interpolation failed; the config cannot boot.

    Attributes:
        faults: one line per fault, ``<file>:<line>: <message>`` (see the module docstring for every
            message). Never contains an environment variable's value.
    """


@dataclass(frozen=True)
class _Ref:
    start: int  # offset of "${" in the template
    end: int  # offset after "}"
    name: str


class _Lines:
    """Offset -> 1-based line number, counting line breaks exactly as PyYAML's reader does."""

    def __init__(self, text: str):
        self._starts = [m.end() for m in _LINE_BREAK.finditer(text)]

    def line(self, offset: int) -> int:
        return bisect.bisect_right(self._starts, offset) + 1

    def column(self, offset: int) -> int:
        i = bisect.bisect_right(self._starts, offset)
        return offset - (self._starts[i - 1] if i else 0) + 1


def interpolate(text: str, env: Mapping[str, str], *, source: str = "config.yaml") -> str:
    """Expand every ``${NAME}`` in ``text`` from ``env``; check the result keeps the template's shape.

    Args:
        text: the raw file contents (comments included).
        env: variable name -> value (usually ``os.environ``). An empty value is set, not unset.
        source: the file name used as the prefix of every fault (``config.yaml``, ``providers.yaml``).

    Returns:
        the interpolated text, ready for ``yaml.safe_load``; ``text`` itself (same object) when it
        holds no ``${``.

    Raises:
        InterpolationError: every fault at once (see the module docstring). YAML errors are reported
            as faults too, without the offending line's text and without a traceback.

    Source: docs/security.md#5-var-interpolation-structure-preserving.
    """
    if "${" not in text:
        return text
    return _Interpolation(text, env, source).run()[0]


def interpolate_and_parse(text: str, env: Mapping[str, str], *,
                          source: str = "config.yaml") -> tuple[str, Any]:
    """:func:`interpolate`, plus the ``yaml.safe_load`` result of the interpolated text.

    The structural check parses the interpolated text anyway; this returns that parse so the loader
    does not parse a third time. A text without ``${`` is parsed once.

    Returns:
        ``(interpolated_text, document)``; ``document`` is None for an empty file.

    Raises:
        InterpolationError: as :func:`interpolate`, and for a text without ``${`` that is not valid
            YAML (``<file>:<line>: invalid YAML: <problem>``).
    """
    if "${" not in text:
        try:
            return text, _parse(text)[1]
        except _ConstructError as e:
            raise InterpolationError([_yaml_fault(e.cause, source, "invalid YAML", redact=False)]) from None
        except _PARSE_ERRORS as e:
            raise InterpolationError([_yaml_fault(e, source, "invalid YAML", redact=False)]) from None
    return _Interpolation(text, env, source).run()


_PARSE_ERRORS = (yaml.YAMLError, ValueError, TypeError, OverflowError, RecursionError)


class _ConstructError(Exception):
    """The text composed, but ``safe_load`` could not build Python values from it (bad tag, date...)."""

    def __init__(self, cause: BaseException):
        super().__init__(str(cause))
        self.cause = cause


def _parse(text: str, *, construct: bool = True) -> tuple[Node | None, Any]:
    """Compose (and, with ``construct``, build like ``yaml.safe_load``) one document.

    Raises:
        yaml.YAMLError: the text is not YAML (composition failed).
        _ConstructError: composition succeeded, construction failed.
    """
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
        data = None
        if construct and node is not None:
            try:
                data = loader.construct_document(node)
            except _PARSE_ERRORS as e:
                raise _ConstructError(e) from None
    finally:
        loader.dispose()
    return node, data


def _yaml_fault(e: BaseException, source: str, lead: str, *, redact: bool, hint: str = "") -> str:
    mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
    where = f"{source}:{mark.line + 1}" if mark is not None else source
    if isinstance(e, yaml.MarkedYAMLError):
        msg = e.problem or e.context or "invalid YAML"
        if e.problem and e.context:
            msg = f"{e.problem} ({e.context})"
    elif isinstance(e, yaml.YAMLError):
        msg = str(e).splitlines()[0] if str(e) else "invalid YAML"
    elif isinstance(e, RecursionError):
        msg = "the document is nested too deeply"
    else:
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
    if redact:  # the substituted value may appear in quoted fragments of PyYAML's message
        msg = _redact(msg)
    return f"{where}: {lead}: {msg}" + (f"; {hint}" if hint else "")


@dataclass
class _Mismatch:
    path: str
    line: int
    desc: str
    start: int  # placeholder-text span of the template node that changed
    end: int


class _Interpolation:
    def __init__(self, text: str, env: Mapping[str, str], source: str):
        self.text = text
        self.env = env
        self.source = source
        self.lines = _Lines(text)
        self.faults: list[str] = []
        self._early: list[tuple[int, str]] = []  # (template offset, fault) from scan + resolve
        self.refs: list[_Ref] = []
        self.values: dict[str, str] = {}  # usable variables only
        prefix = "bbPH"
        while prefix in text:
            prefix += "Q"
        self.prefix = prefix
        self._token_re = re.compile(re.escape(prefix) + r"(\d+)Z")
        self.ph_offsets: list[int] = []  # start of each placeholder in the placeholder text

    # -- scanning -------------------------------------------------------------------------------

    def _at(self, offset: int) -> str:
        return f"{self.source}:{self.lines.line(offset)}"

    def scan(self) -> None:
        text, pos = self.text, 0
        while (i := text.find("${", pos)) >= 0:
            j = i + 2
            k = _TAIL.match(text, j).end()  # type: ignore[union-attr]
            name = text[j:k]
            closed = k < len(text) and text[k] == "}"
            if "${" in name or not closed:
                if "${" in name:
                    name = name[: name.index("${")]
                shown = name if len(name) <= 40 else name[:40] + "…"
                self._early.append((i, f"{self._at(i)}: unclosed variable reference '${{{shown}' at column "
                                   f"{self.lines.column(i)} (no closing '}}' on that line)"))
                pos = j
                continue
            pos = k + 1
            if not name:
                self._early.append((i, f"{self._at(i)}: empty variable name in ${{}}"))
            elif not _NAME.match(name):
                shown = name if len(name) <= 40 else name[:40] + "…"
                self._early.append((i, f"{self._at(i)}: invalid variable name in ${{{shown}}}: use letters, "
                                   f"digits and _ (not starting with a digit); defaults like ${{VAR:-x}} "
                                   f"are not supported"))
            else:
                self.refs.append(_Ref(i, k + 1, name))

    def resolve(self) -> None:
        seen: set[str] = set()
        for ref in self.refs:
            if ref.name in seen:
                continue
            seen.add(ref.name)
            value = self.env.get(ref.name)
            at = self._at(ref.start)
            if value is None:
                self._early.append((ref.start, f"{at}: unset environment variable: {ref.name}"))
                continue
            bad = _CONTROL.search(value)
            if bad:
                self._early.append((ref.start, (
                    f"{at}: environment variable {ref.name} contains a control character "
                    f"(U+{ord(bad.group()):04X}); values must be one line without control characters "
                    f"(newline-based YAML injection guard); for multi-line values {_FILE_HINT}")))
                continue
            self.values[ref.name] = value

    # -- rendering ------------------------------------------------------------------------------

    def render(self, real: Iterable[str] | None) -> str:
        """Template with ``real`` variables substituted and placeholders everywhere else.

        ``real=None`` renders the placeholder text and records placeholder offsets.
        """
        real_set = set(real) if real is not None else set()
        out: list[str] = []
        pos = length = 0
        record = real is None
        for idx, ref in enumerate(self.refs):
            chunk = self.text[pos:ref.start]
            out.append(chunk)
            length += len(chunk)
            piece = self.values[ref.name] if ref.name in real_set else f"{self.prefix}{idx}Z"
            if record:
                self.ph_offsets.append(length)
            out.append(piece)
            length += len(piece)
            pos = ref.end
        out.append(self.text[pos:])
        return "".join(out)

    def _display(self, s: str) -> str:
        return self._token_re.sub(lambda m: "${" + self.refs[int(m.group(1))].name + "}", s)

    def _names_in(self, start: int, end: int) -> list[str]:
        lo = bisect.bisect_left(self.ph_offsets, start)
        hi = bisect.bisect_left(self.ph_offsets, end)
        names = [self.refs[i].name for i in range(lo, hi)]
        return [n for n in dict.fromkeys(names) if n in self.values]

    # -- the run ----------------------------------------------------------------------------------

    def run(self) -> tuple[str, Any]:
        self.scan()
        self.resolve()
        self.faults = [msg for _, msg in sorted(self._early, key=lambda f: f[0])]
        ph_text = self.render(None)
        try:
            ph_root, _ = _parse(ph_text, construct=False)  # placeholders may not fit typed tags (!!int)
        except _PARSE_ERRORS as e:
            self.faults.append(_yaml_fault(e, self.source, "invalid YAML", redact=False))
            raise InterpolationError(self.faults) from None
        real_text = self.render(self.values)
        data: Any = None
        try:
            real_root, data = _parse(real_text)
        except _ConstructError as e:
            self.faults.append(self._construct_fault(e.cause, real_text))
        except _PARSE_ERRORS as e:
            self.faults.append(self._real_parse_fault(e, ph_root))
        else:
            for mm in sorted(_compare(ph_root, real_root, self.prefix, self._display),
                             key=lambda m: (m.line, m.path)):
                self.faults.append(self._structure_fault(mm, ph_root))
        if self.faults:
            raise InterpolationError(self.faults)
        return real_text, data

    def _trial_parse(self, name: str) -> Node | BaseException | None:
        """Compose the template with only ``name`` substituted (placeholders elsewhere)."""
        try:
            return _parse(self.render([name]), construct=False)[0]
        except _PARSE_ERRORS as e:
            return e

    def _on_line(self, e: BaseException) -> list[str]:
        mark = getattr(e, "problem_mark", None) or getattr(e, "context_mark", None)
        if mark is None:
            return []
        names = [r.name for r in self.refs
                 if r.name in self.values and self.lines.line(r.start) == mark.line + 1]
        return list(dict.fromkeys(names))

    def _construct_fault(self, e: BaseException, real_text: str) -> str:
        mark = getattr(e, "problem_mark", None) or _failing_scalar_mark(real_text)
        if mark is not None and getattr(e, "problem_mark", None) is None:
            e = yaml.MarkedYAMLError(problem=str(e).splitlines()[0] if str(e) else type(e).__name__,
                                     problem_mark=mark)
        culprits = self._on_line(e)
        if not culprits:
            return _yaml_fault(e, self.source, "invalid YAML", redact=True)
        refs = ", ".join("${" + n + "}" for n in culprits)
        return _yaml_fault(e, self.source, f"invalid YAML value after substituting {refs}", redact=True,
                           hint="check the value against the type the template declares")

    def _real_parse_fault(self, e: BaseException, ph_root: Node | None) -> str:
        culprits = [n for n in self.values if isinstance(self._trial_parse(n), BaseException)]
        culprits = culprits or self._on_line(e) or list(self.values)
        refs = ", ".join("${" + n + "}" for n in culprits)
        lead = f"invalid YAML after substituting {refs}"
        return _yaml_fault(e, self.source, lead, redact=True, hint=self._quote_hint(culprits, ph_root))

    def _quote_hint(self, culprits: list[str], ph_root: Node | None) -> str:
        styles = _scalar_styles(ph_root, self.ph_offsets, self.refs)
        for name in culprits:
            value = self.values[name]
            for style in styles.get(name, ()):
                if style == '"' and ('"' in value or "\\" in value):
                    return (f"the value of ${{{name}}} contains '\"' or '\\' and is substituted inside a "
                            f"double-quoted scalar, which it ends or escapes; {_FILE_HINT}")
                if style == "'" and "'" in value:
                    return (f"the value of ${{{name}}} contains \"'\" and is substituted inside a "
                            f"single-quoted scalar, which it ends; {_FILE_HINT}")
        return f"quote the reference in the template, or {_FILE_HINT}"

    def _structure_fault(self, mm: _Mismatch, ph_root: Node | None) -> str:
        candidates = self._names_in(mm.start, mm.end) or list(self.values)
        culprits = []
        for name in candidates:
            trial = self._trial_parse(name)
            if isinstance(trial, BaseException):
                continue
            if any(m.path == mm.path for m in _compare(ph_root, trial, self.prefix, self._display)):
                culprits.append(name)
        culprits = culprits or candidates
        at = f"{mm.path} ({mm.desc})"
        if len(culprits) == 1:
            what = f"the value of ${{{culprits[0]}}} changes"
        elif culprits:
            what = "the values of " + ", ".join("${" + n + "}" for n in culprits) + " change"
        else:
            what = "a substituted value changes"
        return f"{self.source}:{mm.line}: {what} the YAML structure at {at}; {_FILE_HINT}"


def _failing_scalar_mark(text: str) -> Any:
    """Start mark of the first scalar ``safe_load`` cannot construct (PyYAML raises those unmarked)."""
    loader = _Loader(text)
    try:
        root = loader.get_single_node()
        stack = [root] if root is not None else []
        seen: set[int] = set()
        while stack:
            node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, ScalarNode):
                try:
                    loader.construct_object(node)
                except _PARSE_ERRORS:
                    return node.start_mark
            elif isinstance(node, SequenceNode):
                stack.extend(reversed(node.value))
            elif isinstance(node, MappingNode):
                for k, v in reversed(node.value):
                    stack.extend((v, k))
    except _PARSE_ERRORS:
        return None
    finally:
        loader.dispose()
    return None


def _kind(node: Node) -> str:
    if isinstance(node, MappingNode):
        return "map"
    if isinstance(node, SequenceNode):
        return "sequence"
    return "scalar"


def _join(path: str, key: str) -> str:
    if re.fullmatch(r"[A-Za-z0-9_${}\-]+", key):
        return f"{path}.{key}" if path else key
    return f"{path}[{key!r}]"


def _compare(ph: Node | None, real: Node | None, prefix: str, display: Any) -> list[_Mismatch]:
    """Walk both node graphs; report the outermost positions whose shape differs."""
    out: list[_Mismatch] = []
    if ph is None or real is None:
        if (ph is None) != (real is None):
            node = ph if ph is not None else real
            assert node is not None
            out.append(_Mismatch("(document root)", 1, "empty document changed", 0,
                                 node.end_mark.index if ph is not None else 0))
        return out
    seen: set[tuple[int, int]] = set()
    stack: list[tuple[Node, Node, str]] = [(ph, real, "")]
    while stack:
        p, r, path = stack.pop()
        if (id(p), id(r)) in seen:
            continue
        seen.add((id(p), id(r)))
        shown = path or "(document root)"
        span = (p.start_mark.index, p.end_mark.index)
        line = p.start_mark.line + 1
        pk, rk = _kind(p), _kind(r)
        if pk != rk:
            out.append(_Mismatch(shown, line, f"{pk} -> {rk}", *span))
            continue
        children: list[tuple[Node, Node, str]] = []
        if isinstance(p, SequenceNode):
            if len(p.value) != len(r.value):
                out.append(_Mismatch(shown, line, f"sequence length {len(p.value)} -> {len(r.value)}",
                                     *span))
                continue
            children = [(a, b, f"{path}[{i}]") for i, (a, b) in enumerate(zip(p.value, r.value))]
        elif isinstance(p, MappingNode):
            if len(p.value) != len(r.value):
                out.append(_Mismatch(shown, line, f"map with {len(p.value)} entries -> {len(r.value)}",
                                     *span))
                continue
            changed = None
            for (pkey, pval), (rkey, rval) in zip(p.value, r.value):
                if isinstance(pkey, ScalarNode):
                    if not isinstance(rkey, ScalarNode):
                        changed = f"key {display(pkey.value)!r} became a {_kind(rkey)}"
                        break
                    if prefix not in pkey.value and pkey.value != rkey.value:
                        changed = f"key {pkey.value!r} replaced"
                        break
                    label = display(pkey.value)
                else:
                    children.append((pkey, rkey, f"{path}[<complex key>]"))
                    label = "<complex key>"
                children.append((pval, rval, _join(path, label)))
            if changed:
                out.append(_Mismatch(shown, line, changed, *span))
                continue
        stack.extend(reversed(children))
    return out


def _scalar_styles(root: Node | None, offsets: list[int], refs: list[_Ref]) -> dict[str, set[str]]:
    """Variable name -> quoting styles of the placeholder-text scalars its references sit in."""
    out: dict[str, set[str]] = {}
    if root is None:
        return out
    seen: set[int] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            if node.style in ('"', "'"):
                lo = bisect.bisect_left(offsets, node.start_mark.index)
                hi = bisect.bisect_left(offsets, node.end_mark.index)
                for i in range(lo, hi):
                    out.setdefault(refs[i].name, set()).add(node.style)
        elif isinstance(node, SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, MappingNode):
            for k, v in node.value:
                stack.extend((k, v))
    return out
