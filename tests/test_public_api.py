import neardup


def test_all_is_sorted_and_resolves():
    assert neardup.__all__ == sorted(neardup.__all__)
    for name in neardup.__all__:
        assert getattr(neardup, name) is not None, name


def test_all_is_pinned():
    assert set(neardup.__all__) == {
        "AuthError",
        "Client",
        "ClusterClient",
        "ClusterConfig",
        "ConfigError",
        "CorruptFileError",
        "CorruptRecordError",
        "Decision",
        "DedupConfig",
        "DedupResult",
        "Deduplicator",
        "Explanation",
        "FormatError",
        "Fingerprinter",
        "ForbiddenError",
        "HammingIndex",
        "HashRing",
        "IndexStateError",
        "InputError",
        "InputTypeError",
        "Match",
        "MissingDependencyError",
        "NeardupError",
        "NotFoundError",
        "PayloadTooLargeError",
        "RecordError",
        "ServiceUnavailableError",
        "StorageError",
        "UnsupportedVersionError",
        "__version__",
        "all_pairs",
        "content_hash",
        "content_hash_many",
        "dedup",
        "dedup_dataset",
        "dedup_files",
        "explain",
        "hamming",
        "hamming_cdist",
        "hamming_many",
        "hamming_to_many",
    }


def test_function_names_are_not_shadowed_by_submodules():
    import importlib

    importlib.import_module("neardup.fingerprint.distance")
    importlib.import_module("neardup.batch.run")
    importlib.import_module("neardup.batch.files")
    assert callable(neardup.hamming) and neardup.hamming(0b101, 0b110) == 2
    assert callable(neardup.dedup) and not isinstance(neardup.dedup, type(neardup))
    assert callable(neardup.dedup_files) and not isinstance(neardup.dedup_files, type(neardup))
    importlib.import_module("neardup.review.explain")  # the module and the function share a name
    assert callable(neardup.explain) and not isinstance(neardup.explain, type(neardup))


def test_all_matches_lazy_exports():
    assert set(neardup.__all__) == {*neardup._EXPORTS, "__version__"}


#: public names ending in ``_reference`` that are not oracles
NOT_ORACLES = {"by_reference"}  # neardup.distributed._store: documents read by their positions


def test_no_reference_oracle_is_public():
    """Reference oracles live in each wing's ``reference`` module, for tests: no ``__all__``
    (nor a package's lazy ``_EXPORTS``) anywhere in the package lists a ``*_reference``."""
    import ast
    from pathlib import Path

    listed = []
    root = Path(neardup.__file__).resolve().parent
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign):
                targets, value = node.targets, node.value
            elif isinstance(node, ast.AnnAssign) and node.value is not None:
                targets, value = [node.target], node.value
            else:
                continue
            names = {t.id for t in targets if isinstance(t, ast.Name)}
            if "__all__" in names and isinstance(value, ast.List | ast.Tuple):
                items = value.elts
            elif "_EXPORTS" in names and isinstance(value, ast.Dict):
                items = [k for k in value.keys if k is not None]
            else:
                continue
            for item in items:
                name = str(item.value) if isinstance(item, ast.Constant) else ""
                if name.endswith("_reference") and name not in NOT_ORACLES:
                    listed.append(f"{path.relative_to(root.parent)}: {name}")
    assert listed == []
