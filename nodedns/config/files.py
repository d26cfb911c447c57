"""The --config file read (`load_file`, `load_text`: YAML, bounded, duplicate keys refused) and merged
with the flags (`from_sources`: flags win; a relative path in the file is read from the file's folder).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from nodedns.config.build import build
from nodedns.config.options import OPTIONS, Config
from nodedns.config.zones import zone_key
from nodedns.errors import ConfigError

MAX_CONFIG_BYTES = 1 << 20  # a --config file larger than this is refused


def load_file(path: str) -> dict[str, Any]:
    """The mapping in a YAML config file; errors name the `config` key (a file with any byte in it gives
    one: not UTF-8, not YAML, nested too deep, too large, not a mapping)."""
    import yaml  # noqa: PLC0415 - YAML is only needed when a config file is used

    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_CONFIG_BYTES + 1)
    except OSError as exc:
        raise ConfigError("config", f"cannot read {path}: {exc.strerror or exc}") from None
    if len(raw) > MAX_CONFIG_BYTES:
        raise ConfigError("config", f"{path} is over {MAX_CONFIG_BYTES} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError("config", f"{path} is not UTF-8 text (byte 0x{raw[exc.start]:02x} at offset "
                                    f"{exc.start})") from None
    try:
        data = load_text(text)
    except yaml.YAMLError as exc:
        raise ConfigError("config", f"{path} is not valid YAML: {' '.join(str(exc).split())}") from None
    except RecursionError:
        raise ConfigError("config", f"{path} is nested too deeply to be a config file") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError("config", f"{path} must hold a mapping of option keys")
    return data


def load_text(text: str) -> Any:
    """YAML text -> data, as yaml.safe_load, but a key written twice in one mapping is a ConfigError naming
    it (and, under `zones:`, its zone) and both lines: YAML loaders keep the last one silently. Raises
    yaml.YAMLError for text that is not YAML."""
    import yaml  # noqa: PLC0415 - YAML is only needed when a config file is used

    node = yaml.compose(text, Loader=yaml.SafeLoader)
    if node is None:
        return None
    _refuse_duplicates(node, ())
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicates(node: Any, path: tuple[str, ...]) -> None:
    import yaml  # noqa: PLC0415

    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_duplicates(item, path)
        return
    if not isinstance(node, yaml.MappingNode):
        return
    seen: dict[str, int] = {}
    for key_node, value_node in node.value:
        key = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
        line = key_node.start_mark.line + 1
        if key in seen and key != "<<":
            first = f"lines {seen[key]} and {line}"
            if path[:1] == ("zones",):
                zone = path[1] if len(path) > 1 else key
                inner = ".".join((*path[2:], key)) if len(path) > 1 else ""
                raise ConfigError(zone_key(zone, inner), f"is written twice ({first}); write each once")
            raise ConfigError(".".join((*path, key)), f"is written twice ({first}); write each once")
        seen[key] = line
        _refuse_duplicates(value_node, (*path, key))


def from_sources(flags: Mapping[str, Any], *, environ: Mapping[str, str] | None = None) -> Config:
    """Merge defaults < config file < flags and build the Config. A relative path in the config file
    is relative to the file's folder (as the kubelet reads its configuration file); on the command
    line, to the current directory."""
    merged: dict[str, Any] = {}
    config_path = flags.get("config")
    if config_path:
        folder = os.path.dirname(os.path.abspath(str(config_path)))
        for key, value in load_file(str(config_path)).items():
            norm = str(key).replace("_", "-")
            if norm == "config":
                raise ConfigError("config", "a config file cannot name another config file")
            merged[norm] = _from_folder(folder, value) if norm in PATH_KEYS else value
    for key, value in flags.items():
        merged[str(key).replace("_", "-")] = value
    return build(merged, environ=environ)


# The options whose values are paths of files or folders (their metavar says so)
PATH_KEYS = frozenset(opt.key for opt in OPTIONS if opt.metavar in ("FILE", "DIR"))


def _from_folder(folder: str, value: Any) -> Any:
    """A relative path from a config file, made absolute from the file's folder; anything else as it is
    (an absolute path, "" or "none" where the key takes them, a value of the wrong type: `build` says)."""
    if isinstance(value, list):  # a repeatable path key (`hosts`): each item
        return [_from_folder(folder, v) for v in value]
    if isinstance(value, str) and value and value != "none" and not os.path.isabs(value):
        return os.path.join(folder, value)
    return value
