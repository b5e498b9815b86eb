"""Hydra builds the same defaults tree and merges the same config files once per process.

A composition is ~0.2-0.3 s here: ~60% builds the defaults tree (which file of each group, in which order) and ~30%
loads and merges those files. Neither depends on a value override (`data.limit=2`, `hydra.run.dir=...`,
`program.alignment.threshold=0.3`): Hydra applies those to the merged config afterwards. So the jobs of a sweep under
the basic launcher, `compose_config` in scripts, the serving app's second composition and every in-process run of the
tests (Hydra composes each run twice: once to read `hydra.mode`, once to run) rebuilt the very same tree and merge.

`install()` wraps Hydra's two steps: the tree is kept per (primary config, the overrides that are not plain values,
run mode's skip_missing, the config sources and their files), the merged config per (the tree's files, the sources and
their files); each use gets its own copy. A key holds every file's path, size and modification time of the file
sources (conf/, a `hydra.searchpath` folder) and the entries of Hydra's ConfigStore, so an edited YAML file or a
newly registered structured config is composed afresh. Value overrides are applied by Hydra itself, as before, to
the copy: the composed config is the same object Hydra builds without this (tests/test_hydra_reuse.py compares them).
A composition whose tree or merge is new (another group option) still reads its files: each parsed YAML file is kept
per (path, size, modification time) too, and Hydra gets a copy.
Hydra versions whose internals differ (a name not found) compose as usual: `install()` then changes nothing.
"""

from __future__ import annotations

import copy
import dataclasses
import os
import pickle
import threading
from collections import OrderedDict
from typing import Any

from common.run_folder import file_version

_MAX = 64           # kept trees and merged configs, each (a merged config is ~1 MB of OmegaConf nodes)
_LOCK = threading.Lock()
_TREES: OrderedDict[tuple, Any] = OrderedDict()
_MERGED: OrderedDict[tuple, Any] = OrderedDict()
_LOADED: OrderedDict[tuple, Any] = OrderedDict()   # parsed YAML files: (source, file version) -> (result, config)
_MAX_LOADED = 512
_ORIGINALS: dict[str, Any] = {}
_FILE_SOURCES: dict[type, Any] = {}   # file source class -> its own load_config


def install() -> bool:
    """Wrap Hydra's defaults-tree and merge steps and its YAML file loads (once per process); False where this Hydra
    lacks them."""
    if _ORIGINALS:
        return True
    try:
        from hydra._internal import config_loader_impl as loader

        build_tree = loader.create_defaults_list
        merge = loader.ConfigLoaderImpl._compose_config_from_defaults_list
    except (ImportError, AttributeError):
        return False

    def create_defaults_list(repo: Any, config_name: Any, overrides_list: list, prepend_hydra: bool,
                             skip_missing: bool) -> Any:
        sources = _sources_key(repo)
        if sources is None:
            return build_tree(repo, config_name, overrides_list, prepend_hydra, skip_missing)
        for source in repo.get_sources():
            if source.scheme() == "file":
                _keep_parsed_files(type(source))
        values, rest = _split(repo, overrides_list)
        key = (config_name, tuple(o.input_line for o in rest), prepend_hydra, skip_missing, sources)
        with _LOCK:
            tree = _TREES.get(key)
        if tree is None:
            tree = build_tree(repo, config_name, rest, prepend_hydra, skip_missing)  # raises as Hydra does
            _keep(_TREES, key, tree)
        return _with_values(tree, values)

    def compose_config_from_defaults_list(self: Any, defaults: list, repo: Any) -> Any:
        sources = _sources_key(repo)
        if sources is None:
            return merge(self, defaults, repo)
        key = (tuple((d.config_path, d.package, d.parent, d.is_self, d.primary) for d in defaults), sources)
        with _LOCK:
            merged = _MERGED.get(key)
        if merged is None:
            merged = _Frozen(merge(self, defaults, repo))  # its nodes may be the loaded files' own
            _keep(_MERGED, key, merged)
        return merged.copy()

    _ORIGINALS.update(create_defaults_list=build_tree, _compose_config_from_defaults_list=merge)
    loader.create_defaults_list = create_defaults_list
    loader.ConfigLoaderImpl._compose_config_from_defaults_list = compose_config_from_defaults_list
    return True


def _keep_parsed_files(source_class: Any) -> None:
    """Keep what the file source's `load_config` parsed, per (file, size, mtime): a composition whose tree or merge
    is new (another group option) parsed each of its YAML files again, ~2 ms of pure-Python YAML and node building a
    file where a copy is ~0.3 ms. Done on the class Hydra uses now: its plugin scan can import the module anew."""
    with _LOCK:  # two threads composing at once patch the class once
        load_file = source_class.__dict__.get("load_config")
        normalize = getattr(source_class, "_normalize_file_name", None)
        if load_file is None or normalize is None or getattr(load_file, "_clinprog_kept", False):
            return
        source_class.load_config = _kept_loads(load_file, normalize)
        _FILE_SOURCES[source_class] = load_file


def _kept_loads(load_file: Any, normalize: Any) -> Any:
    """`load_file` (a file source's own `load_config`) with its parses kept; each call gets its own copy."""

    def load_config(self: Any, config_path: str) -> Any:
        try:
            key = (self.provider, self.path, *file_version(os.path.join(self.path, normalize(config_path))))
        except OSError:
            return load_file(self, config_path)  # Hydra's own "Config not found"
        with _LOCK:
            loaded = _LOADED.get(key)
        if loaded is None:
            result = load_file(self, config_path)
            loaded = (dataclasses.replace(result, config=None), _Frozen(result.config))
            _keep(_LOADED, key, loaded, _MAX_LOADED)
        result, config = loaded
        # Hydra's repository takes the defaults list out of the config it gets and may rewrite the header's package
        return dataclasses.replace(result, config=config.copy(), header=dict(result.header))

    load_config._clinprog_kept = True  # type: ignore[attr-defined]
    return load_config


def uninstall() -> None:
    """Hydra's own two steps again (tests compare the compositions), and nothing kept."""
    from hydra._internal import config_loader_impl as loader

    if _ORIGINALS:
        loader.create_defaults_list = _ORIGINALS.pop("create_defaults_list")
        loader.ConfigLoaderImpl._compose_config_from_defaults_list = _ORIGINALS.pop("_compose_config_from_defaults_list")
    while _FILE_SOURCES:
        source_class, load_file = _FILE_SOURCES.popitem()
        source_class.load_config = load_file
    clear()


def clear() -> None:
    """Forget every kept tree, merged config and parsed file."""
    with _LOCK:
        _TREES.clear()
        _MERGED.clear()
        _LOADED.clear()


def _keep(store: OrderedDict, key: tuple, value: Any, most: int = _MAX) -> None:
    with _LOCK:
        store[key] = value
        while len(store) > most:
            store.popitem(last=False)


def _split(repo: Any, overrides: list) -> tuple[list, list]:
    """(value overrides, the rest), as Hydra's `Overrides` tells them apart: a dict value, or a key that is no
    config group, is a value override (sweep overrides stay with the rest, where Hydra skips them)."""
    values, rest = [], []
    for override in overrides:
        if not override.is_sweep_override() and (isinstance(override.value(), dict)
                                                   or not repo.group_exists(override.key_or_group)):
            values.append(override)
        else:
            rest.append(override)
    return values, rest


def _with_values(tree: Any, values: list) -> Any:
    """The kept tree with this composition's value overrides (what Hydra's own tree would carry)."""
    overrides = copy.copy(tree.overrides)
    overrides.config_overrides = list(values)
    return type(tree)(defaults=list(tree.defaults), config_overrides=list(values), defaults_tree=tree.defaults_tree,
                      overrides=overrides)


def _sources_key(repo: Any) -> tuple | None:
    """What the repository's config sources hold: each source's kind and path; for a folder every file's path, size
    and modification time; for Hydra's ConfigStore its entries. None (compose as usual) for a source of another kind."""
    try:
        sources = repo.get_sources()
    except AttributeError:
        return None
    out: list[Any] = []
    for source in sources:
        scheme = source.scheme()
        out.append((scheme, source.provider, source.path))
        if scheme == "file":
            out.append(folder_files(source.path.split("://", 1)[-1]))
        elif scheme == "structured":
            out.append(_config_store_entries())
        elif scheme != "pkg":  # an installed package's configs do not change while a process runs
            return None
    return tuple(out)


def folder_files(folder: str | os.PathLike) -> tuple[tuple[str, int, int], ...]:
    """Every file under `folder`: (path, size, modification time in ns), sorted (what a kept composition read)."""
    files = []
    for parent, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(parent, name)
            try:
                stat = os.stat(path)
            except OSError:
                continue
            files.append((path, stat.st_size, stat.st_mtime_ns))
    return tuple(sorted(files))


def _config_store_entries() -> tuple:
    from hydra.core.config_store import ConfigStore

    entries: list[tuple[str, _Same]] = []

    def walk(node: dict, prefix: str) -> None:
        for name, value in node.items():
            if isinstance(value, dict):
                walk(value, f"{prefix}{name}/")
            else:
                entries.append((f"{prefix}{name}", _Same(value.node)))

    walk(ConfigStore.instance().repo, "")
    return tuple(sorted(entries, key=lambda entry: entry[0]))


class _Frozen:
    """A config kept as pickled bytes: each `copy()` is a new config equal to it, nodes, flags and types (unpickling
    is ~3.5x faster than `copy.deepcopy` of a merged config: 2.6 vs 9.4 ms here); a config that does not pickle is
    kept as a deep copy instead."""

    __slots__ = ("data", "config")

    def __init__(self, config: Any) -> None:
        try:
            self.data: bytes | None = pickle.dumps(config, protocol=pickle.HIGHEST_PROTOCOL)
            self.config = None
        except Exception:  # noqa: BLE001 - e.g. a structured config holding a lambda: deep copies, as before
            self.data, self.config = None, copy.deepcopy(config)

    def copy(self) -> Any:
        return pickle.loads(self.data) if self.data is not None else copy.deepcopy(self.config)


class _Same:
    """A key part equal only to the very same object (held, so its id is not reused while the key lives)."""

    __slots__ = ("obj",)

    def __init__(self, obj: Any) -> None:
        self.obj = obj

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Same) and other.obj is self.obj

    def __hash__(self) -> int:
        return id(self.obj)
