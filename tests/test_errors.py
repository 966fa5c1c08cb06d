import pytest

import neardup
from neardup import errors


def test_hierarchy_is_pinned():
    assert issubclass(errors.ConfigError, errors.NeardupError)
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.InputTypeError, errors.InputError)
    assert issubclass(errors.InputTypeError, TypeError)
    assert issubclass(errors.RecordError, errors.InputError)
    assert issubclass(errors.NotFoundError, KeyError)
    assert issubclass(errors.CorruptFileError, errors.FormatError)
    assert issubclass(errors.UnsupportedVersionError, errors.FormatError)
    assert issubclass(errors.MissingDependencyError, ImportError)
    assert issubclass(errors.CorruptRecordError, errors.CorruptFileError)
    assert issubclass(errors.ForbiddenError, errors.AuthError)
    assert issubclass(errors.ForbiddenError, PermissionError)
    for name in errors.__all__:
        obj = getattr(errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, errors.NeardupError)
            assert getattr(neardup, name) is obj


@pytest.mark.parametrize(
    ("exc", "code", "status"),
    [
        (errors.ConfigError("x"), 2, 422),
        (errors.InputTypeError("x"), 2, 422),
        (errors.RecordError("x", path="a.jsonl", line=3), 3, 422),
        (errors.NotFoundError("x"), 4, 404),
        (errors.IndexStateError("x"), 5, 409),
        (errors.CorruptFileError("x"), 6, 500),
        (errors.StorageError("x"), 7, 503),
        (errors.ServiceUnavailableError("x"), 8, 503),
        (errors.MissingDependencyError("x"), 9, 501),
        (errors.AuthError("x"), 10, 401),
        (errors.ForbiddenError("x"), 10, 403),
        (errors.CorruptRecordError("x", doc_id="a", rowid=3), 6, 503),
        (errors.PayloadTooLargeError("x"), 3, 413),
        (RuntimeError("x"), 1, 500),
    ],
)
def test_one_mapping_to_exit_codes_and_statuses(exc, code, status):
    assert errors.exit_code_for(exc) == code
    assert errors.http_status_for(exc) == status


def test_record_error_names_file_and_line():
    e = errors.RecordError("missing field 'text'", path="in.jsonl", line=7)
    assert str(e) == "in.jsonl:7: missing field 'text'"
    assert (e.path, e.line) == ("in.jsonl", 7)


def test_not_found_message_is_plain():
    assert str(errors.NotFoundError("no document 'a'")) == "no document 'a'"


def test_require_gives_install_hint():
    with pytest.raises(errors.MissingDependencyError, match=r"pip install 'neardup\[x\]'"):
        errors.require("no_such_module_neardup", "x", "Feature")


def test_error_codes_are_pinned():
    assert errors.error_code(errors.ForbiddenError("x")) == "forbidden"
    assert errors.error_code(errors.CorruptRecordError("x")) == "corrupt_record"
    e = errors.CorruptRecordError("damaged", doc_id="a", rowid=3)
    assert (e.doc_id, e.rowid, str(e)) == ("a", 3, "damaged")


def test_input_error_names_its_field():
    e = errors.InputError("documents[2].id: must not be empty", field="documents[2].id")
    assert e.field == "documents[2].id" and str(e) == "documents[2].id: must not be empty"
    assert errors.InputTypeError("x").field is None
