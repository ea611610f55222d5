"""Config loading: every mistake is one line naming file, line and field; secrets are refused."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from knowwhen_runner.config import load_config
from knowwhen_runner.exceptions import ConfigError

GOOD = """\
name: t
output: out
models:
  - id: m
    model: hosted_vllm/x
    kind: decision
    api_key_env: MY_KEY
scenarios:
  - id: s
    path: .
"""


def _write(tmp_path: Path, text: str) -> Path:
    (tmp_path / "questions.jsonl").touch()  # the scenario folder (the config's own) in the layout
    path = tmp_path / "c.yaml"
    path.write_text(text)
    return path


def test_good_config_loads_with_paths_relative_to_the_file(tmp_path: Path) -> None:
    """Relative paths resolve against the config's folder, not the working directory."""
    config = load_config(_write(tmp_path, GOOD))
    assert config.output == (tmp_path / "out").resolve()
    assert config.scenarios[0].path == tmp_path.resolve()
    assert config.db_url == f"sqlite:///{(tmp_path / 'out' / 'knowwhen.db').resolve()}"


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("kind: decision", "kind: decisio"), "c.yaml:6: models.0.kind: Input should be 'decision' or 'llm'"),
        (("kind: decision", "kind: decision\n    colour: red"), "c.yaml:7: models.0.colour: unknown field"),
        (
            ("name: t", "name: t\nworkers: {concurrency: lots}"),
            "c.yaml:2: workers.concurrency: Input should be",
        ),
        (("path: .", "path: missing"), "c.yaml:10: scenarios.0.path:"),
        (
            ("name: t", "name: t\nworkers: {quarantine_failures: 12}"),
            "c.yaml:2: workers.quarantine_failures: unknown field; it is replaced by workers.set_aside_error_rate",
        ),
        (
            ("api_key_env: MY_KEY", "api_key: sk-abcdefghijklmnopqrstu"),
            "c.yaml:7: models.0.api_key: literal API keys",
        ),
        (
            ("api_key_env: MY_KEY", "api_key_env: sk-abcdefghijklmnopqrstu"),
            "c.yaml:7: models.0.api_key_env: literal API keys",
        ),
        (("id: s", "id: m\n  - id: m\n    path: ."), "scenarios"),
        (
            ("kind: decision", "kind: llm\n    params: {tool_choice: auto, temperature: 0}"),
            "c.yaml:7: models.0.params: tool_choice is set by the runner and cannot be a "
            "param (use the model's tool_choice setting)",
        ),
        (
            ("kind: decision", "kind: llm\n    params: {messages: []}"),
            "models.0.params: messages",
        ),
        (
            ("kind: decision", "kind: llm\n    tool_choice: none"),
            "c.yaml:7: models.0.tool_choice: Input should",
        ),
    ],
)
def test_bad_config_names_file_line_and_field(tmp_path: Path, edit: tuple[str, str], expected: str) -> None:
    """Each mistake is reported with the line and dotted field path."""
    text = GOOD.replace(*edit, 1)
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_duplicate_model_ids_are_refused(tmp_path: Path) -> None:
    """Two models with one id would overwrite each other's answers."""
    text = GOOD.replace("scenarios:", "  - id: m\n    model: hosted_vllm/y\n    kind: llm\nscenarios:")
    with pytest.raises(ConfigError, match="duplicate models id 'm'"):
        load_config(_write(tmp_path, text))


def test_env_vars_expand_in_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """${VAR} in a path comes from the environment; an unset one is named."""
    monkeypatch.setenv("KW_DATA", str(tmp_path))
    config = load_config(_write(tmp_path, GOOD.replace("path: .", "path: ${KW_DATA}")))
    assert config.scenarios[0].path == tmp_path.resolve()
    monkeypatch.delenv("KW_DATA")
    with pytest.raises(ConfigError, match="KW_DATA is not set"):
        load_config(_write(tmp_path, GOOD.replace("path: .", "path: ${KW_DATA}")))


def test_cli_prints_one_line_and_exits_2(tmp_path: Path) -> None:
    """The command line shows a bad config as one error line, never a traceback."""
    path = _write(tmp_path, GOOD.replace("kind: decision", "kind: 7"))
    done = subprocess.run(
        [sys.executable, "-m", "knowwhen_runner", "plan", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "c.yaml:6: models.0.kind" in lines[0]
    assert "Traceback" not in done.stderr


def test_a_stored_config_with_a_key_given_twice_still_loads(tmp_path: Path) -> None:
    """A key given twice is refused in a config file, but a config stored with an earlier run still loads
    (the last one wins, as when it ran), so its status and finalize keep working."""
    from knowwhen_runner.config import parse_config

    text = GOOD + "name: second\n"
    with pytest.raises(ConfigError, match="name: this key is given twice"):
        load_config(_write(tmp_path, text))
    assert parse_config(text, base=tmp_path, source="stored", check_files=False).name == "second"


def _bomb(levels: int) -> str:
    """A list of nine strings, then ``levels`` lists each of nine aliases to the one before."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels + 1)]
    return "\n".join(lines) + "\n"


def test_an_alias_bomb_is_refused_at_the_alias_that_crosses_the_cap(tmp_path: Path) -> None:
    """Nine lines that expand to 387 million values are refused at the line where the count passes
    MAX_VALUES, before any walk (the duplicate-key check once spun on it for minutes)."""
    text = GOOD + _bomb(8)
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    assert str(info.value).endswith(
        "c.yaml:16: the config holds more than 100,000 values once its aliases (*name) are expanded; "
        "write the values out or use fewer aliases"
    )


def test_aliases_below_the_cap_are_left_alone(tmp_path: Path) -> None:
    """Anchors a config shares (a model merged into another, a path reused) load as written, and the
    first levels of a bomb (7,381 values) pass the cap, refused only for the unknown field they are in."""
    shared = (
        GOOD.replace("  - id: m\n", "  - &base\n    id: m\n", 1).replace(
            "scenarios:", "  - {<<: *base, id: m2}\nscenarios:"
        )
        + "  - id: t\n    path: *here\n"
    )
    config = load_config(_write(tmp_path, shared.replace("path: .", "path: &here .")))
    assert [(m.id, m.model) for m in config.models] == [("m", "hosted_vllm/x"), ("m2", "hosted_vllm/x")]
    assert [s.id for s in config.scenarios] == ["s", "t"]
    with pytest.raises(ConfigError, match=r"c.yaml:11: a0: unknown field"):
        load_config(_write(tmp_path, GOOD + _bomb(3)))


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("9" * 5000, "c.yaml:5: models.0.max_tokens: a number outside"),
        ("0x" + "f" * 200, "c.yaml:5: models.0.max_tokens: a number outside"),
        ("-" + "1" * 101, "c.yaml:5: models.0.max_tokens: a number outside"),
        ("9" * 99, "c.yaml:5: models.0.max_tokens: a number outside"),
    ],
    ids=["5000 digits", "hex 200", "negative 101", "99 digits"],
)
def test_a_number_too_long_to_read_is_named_by_its_field(tmp_path: Path, value: str, expected: str) -> None:
    """An integer of thousands of digits (Python refuses to read past 4,300) is named by file, line and
    field, as one of 20 digits past 64 bits is."""
    text = GOOD.replace("  - id: m\n", f"  - id: m\n    max_tokens: {value}\n", 1)
    with pytest.raises(ConfigError) as info:
        load_config(_write(tmp_path, text))
    assert expected in str(info.value)
    assert "\n" not in str(info.value)


def test_a_config_past_the_size_cap_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A config file larger than MAX_CONFIG_BYTES is named with its size, unread."""
    from knowwhen_runner.config.yaml_checks import MAX_CONFIG_BYTES

    path = _write(tmp_path, GOOD + "#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(
        ConfigError, match=r"c.yaml: the config is 4,194,\d{3} bytes, more than a config may be"
    ):
        load_config(path)
    assert load_config(_write(tmp_path, GOOD + "#" * (MAX_CONFIG_BYTES - len(GOOD) - 2) + "\n")).name == "t"
