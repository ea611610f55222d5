"""Loading a config file: ``${VAR}`` expansion, relative paths, literal credentials refused, ``file:line`` errors."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from ..exceptions import ConfigError
from ..messages import say
from .credentials import ENV_REF, expand_env, literal_credential, register_written
from .fields import _KEY_SHAPE, _SECRET_FIELDS
from .scenario_spec import ScenarioSpec
from .sweep_config import SweepConfig
from .yaml_checks import (
    INT_RANGE,
    MAX_CONFIG_BYTES,
    BoundedLoader,
    TooLarge,
    duplicate_key,
    long_number,
    out_of_range,
)

_REPLACED = {
    ("workers", "quarantine_failures"): (
        "; it is replaced by workers.set_aside_error_rate (a sequential test's false set-aside rate, "
        "default 0.01; null: never)"
    ),
}
"""Fields an earlier release had, and what took their place."""


def _line_of(node: yaml.Node | None, loc: tuple[Any, ...]) -> int | None:
    """Follow a pydantic error location through the YAML node tree; return the deepest line found."""
    line = node.start_mark.line + 1 if node is not None else None
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            nxt = next((v for k, v in node.value if getattr(k, "value", None) == part), None)
            if nxt is None:
                key = next((k for k, _ in node.value if getattr(k, "value", None) == part), None)
                return key.start_mark.line + 1 if key is not None else line
            node = nxt
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
        else:
            break
        line = node.start_mark.line + 1
    return line


def _find_literal_secret(
    node: yaml.Node, path: tuple[Any, ...] = ()
) -> tuple[tuple[Any, ...], yaml.Node] | None:
    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            name = str(getattr(key, "value", ""))
            # Under params, a header or query credential gets its own sentence (``literal_credential``).
            if name.lower() in _SECRET_FIELDS and "params" not in path and not _only_refs(value):
                return (*path, name), key
            found = _find_literal_secret(value, (*path, name))
            if found:
                return found
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found = _find_literal_secret(item, (*path, i))
            if found:
                return found
    elif (
        isinstance(node, yaml.ScalarNode)
        and isinstance(node.value, str)
        and _KEY_SHAPE.match(node.value)
        and (not path or path[-1] not in {"model", "id", "name", "qhash"})
    ):
        return path, node
    return None


def _only_refs(node: yaml.Node) -> bool:
    """A value given wholly through ``${VAR}`` (an auth scheme word such as ``Bearer`` aside)."""
    if not isinstance(node, yaml.ScalarNode) or not isinstance(node.value, str):
        return False
    rest = re.sub(r"\b(Bearer|Basic|Token)\b", "", ENV_REF.sub("", node.value), flags=re.IGNORECASE)
    return bool(ENV_REF.search(node.value)) and not rest.strip()


def _dotted(loc: tuple[Any, ...]) -> str:
    return ".".join(str(p) for p in loc) or "(top level)"


def _as_list(value: Any) -> list[Any]:
    """A list field as a list; anything else is left for validation to report."""
    return value if isinstance(value, list) else []


def _resolve_paths(data: dict[str, Any], base: Path, source: str) -> dict[str, Any]:
    data = dict(data)
    if isinstance(data.get("output"), str):
        data["output"] = str((base / expand_env(data["output"], f"{source}: output")).resolve())
    if isinstance(data.get("db"), str):
        data["db"] = expand_env(data["db"], f"{source}: db", secret="db")
    scenarios = []
    for i, sc in enumerate(_as_list(data.get("scenarios"))):
        if isinstance(sc, dict) and isinstance(sc.get("path"), str):
            sc = dict(sc)
            sc["path"] = str((base / expand_env(sc["path"], f"{source}: scenarios.{i}.path")).resolve())
        if isinstance(sc, dict) and isinstance(sc.get("exclude"), str):
            sc = dict(sc)
            where = f"{source}: scenarios.{i}.exclude"
            sc["exclude"] = str((base / expand_env(sc["exclude"], where)).resolve())
        scenarios.append(sc)
    if scenarios:
        data["scenarios"] = scenarios
    cache = data.get("cache")
    if isinstance(cache, dict) and isinstance(cache.get("path"), str):
        cache = {**cache, "path": str((base / expand_env(cache["path"], f"{source}: cache.path")).resolve())}
    if isinstance(cache, dict) and isinstance(cache.get("url"), str):
        cache = {**cache, "url": expand_env(cache["url"], f"{source}: cache.url", secret="db")}
    if cache is not None:
        data["cache"] = cache
    models = []
    for i, m in enumerate(_as_list(data.get("models"))):
        if isinstance(m, dict) and isinstance(m.get("api_base"), str):
            m = dict(m)
            m["api_base"] = expand_env(m["api_base"], f"{source}: models.{i}.api_base", secret="url")
        models.append(m)
    if models:
        data["models"] = models
    notify = data.get("notify")
    if isinstance(notify, dict):
        notify = dict(notify)
        for field, kind in (("command", "text"), ("url", "url")):
            if isinstance(notify.get(field), str):
                notify[field] = expand_env(notify[field], f"{source}: notify.{field}", secret=kind)
        data["notify"] = notify
    return data


def _missing_layout(spec: ScenarioSpec) -> str | None:
    """What a question-set folder lacks, checked before anything walks it (a link to a big tree)."""
    folder = spec.path
    if spec.kind != "states" or folder is None or not folder.is_dir():
        return None
    stem = f"questions_{spec.variant}" if spec.variant and spec.variant != "main" else "questions"
    if (folder / f"{stem}.jsonl.gz").is_file() or (folder / f"{stem}.jsonl").is_file():
        return None
    return f"{folder} is not a question-set folder: it has no {stem}.jsonl.gz or {stem}.jsonl"


def load_config(path: str | Path) -> SweepConfig:
    """Load and validate a sweep config; every failure is one ``ConfigError`` line naming file and field."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: config file not found")
    try:
        size = path.stat().st_size
        if size > MAX_CONFIG_BYTES:
            raise ConfigError(
                f"{path}: the config is {size:,} bytes, more than a config may be ({MAX_CONFIG_BYTES:,})"
            )
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the config ({exc})") from None
    return parse_config(text, base=path.parent, source=str(path))


def _refuse_written_secrets(root: yaml.Node, data: dict[str, Any], path: str, stored: bool) -> None:
    """A key or credential written in the config (not given through the environment) stops the load;
    in a config stored by an earlier release, a written credential is only registered for redaction."""
    secret = _find_literal_secret(root)
    if secret:
        loc, node = secret
        raise ConfigError(
            f"{path}:{node.start_mark.line + 1}: {_dotted(loc)}: literal API keys are not allowed in a config; "
            "put the key in an environment variable and name it with api_key_env"
        )
    if stored:
        register_written(data)
        return
    written = literal_credential(data)
    if written:
        loc, found = written
        raise ConfigError(
            f"{path}:{_line_of(root, loc)}: {_dotted(loc)}: a credential is written in the config "
            f"({found.what}); put it in an environment variable and write ${{{found.variable}}} in its place"
        )


def parse_config(
    text: str, *, base: Path, source: str, check_files: bool = True, stored: bool = False
) -> SweepConfig:
    """Validate config text; relative paths resolve against ``base``; ``source`` names it in errors.

    ``check_files=False`` skips checking that scenario paths exist (a config stored with a run, read on
    a machine that has none of its files), and keys given twice (a run stored before they were refused
    keeps the meaning it ran with: the last one wins). ``stored=True`` reads a config stored with a run:
    one an earlier release stored with a credential written in it still opens, the credential redacted.
    """
    path = source
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path}: the config is more than a config may be ({MAX_CONFIG_BYTES:,} bytes)")
    try:
        return _parse(text, base=base, source=source, check_files=check_files, stored=stored)
    except RecursionError:
        raise ConfigError(f"{path}: the config is nested too deeply to be a sweep config") from None


def _check_keys_and_numbers(root: yaml.Node, data: dict[str, Any], path: str, *, twice_ok: bool) -> None:
    twice = None if twice_ok else duplicate_key(root)
    if twice:
        loc, second = twice
        raise ConfigError(f"{path}:{second}: {_dotted(loc)}: this key is given twice; keep one")
    huge = out_of_range(data)
    if huge:
        loc, _ = huge
        raise ConfigError(
            f"{path}:{_line_of(root, loc)}: {_dotted(loc)}: a number outside {INT_RANGE[0]}..{INT_RANGE[1]}"
        )


def _parse(text: str, *, base: Path, source: str, check_files: bool, stored: bool) -> SweepConfig:
    path = source
    try:
        # Bounded: aliases may not expand the config past MAX_VALUES, nor a number be too long to read.
        root = yaml.compose(text, Loader=BoundedLoader)
        huge = long_number(root)
        if huge:
            loc, where_long = huge
            raise ConfigError(
                f"{path}:{where_long}: {_dotted(loc)}: a number outside {INT_RANGE[0]}..{INT_RANGE[1]}"
            )
        data = yaml.load(text, Loader=BoundedLoader)  # a safe loader, bounded
    except TooLarge as exc:
        where = f":{exc.mark.line + 1}" if exc.mark is not None else ""
        raise ConfigError(f"{path}{where}: {exc.message}") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f":{mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())  # one line, whatever YAML said
        raise ConfigError(f"{path}{where}: not valid YAML ({problem})") from None
    if not isinstance(data, dict) or root is None:
        raise ConfigError(f"{path}:1: a config is a YAML mapping (models, scenarios, output, ...)")
    _check_keys_and_numbers(root, data, path, twice_ok=not check_files)
    _refuse_written_secrets(root, data, path, stored)
    data = _resolve_paths(data, base, source)
    try:
        config = SweepConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(err["loc"])
        line = _line_of(root, loc)
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field" + _REPLACED.get(loc, "")
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        named = re.match(r"([A-Za-z_][\w.]*): ", msg) if not loc else None
        if named:  # a check across fields names the field it refuses: point at that one's line
            loc = tuple(int(p) if p.isdigit() else p for p in named[1].split("."))
            line, msg = _line_of(root, loc), msg[named.end() :]
        raise ConfigError(f"{path}:{line}: {_dotted(loc)}: {msg}{more}") from None
    for i, sc in enumerate(config.scenarios if check_files else ()):
        if sc.path is not None and not sc.path.exists():
            line = _line_of(root, ("scenarios", i, "path"))
            gone = (
                say("l1.folder_missing", path=sc.path)
                if sc.kind == "isolated"
                else f"{sc.path} does not exist"
            )
            raise ConfigError(f"{path}:{line}: scenarios.{i}.path: {gone}")
        missing = _missing_layout(sc)
        if missing:
            line = _line_of(root, ("scenarios", i, "path"))
            raise ConfigError(f"{path}:{line}: scenarios.{i}.path: {missing}")
        if sc.exclude is not None and not sc.exclude.is_file():
            at = _line_of(root, ("scenarios", i, "exclude"))
            raise ConfigError(f"{path}:{at}: scenarios.{i}.exclude: {sc.exclude} is not a file")
    return config


def config_hash(path: Path) -> str:
    """sha256 of the config file's bytes, recorded in manifests for provenance."""
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()
