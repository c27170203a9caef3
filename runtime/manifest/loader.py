"""Loading a manifest (YAML text or a file) into the pydantic model, every problem by its manifest path.

``validate_manifest`` collects all problems — schema (pydantic), structure (a stream that starts
nowhere, a step after ``to``, an unknown stream, a duplicate name) and the graph checks shared with
the Python builder (:mod:`streamapp.runtime.topology.validate`: expressions, function references,
serdes, types) — and returns them in manifest order instead of stopping at the first. The last two
come from the conversion to the graph (:mod:`streamapp.runtime.manifest.convert`).
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping

import pydantic
import yaml

from streamapp.runtime import errors
from streamapp.runtime.manifest import convert, models, topology_spec

__all__ = ["load_manifest", "validate_manifest"]

_OPS = tuple(
    topology_spec.Step.model_fields[n].alias or n for n in topology_spec.Step.model_fields if n != "name"
)
#: Kafka Streams operations this version refuses plainly: a step naming one of them is told so, not
#: that it is unknown. The one place to change when they land.
_NOT_YET: tuple[str, ...] = ()


def _not_yet(what: str) -> str:
    return f"{what} is not supported yet in this version"


#: Type names pydantic puts into error locations for union members; a user never wrote them.
_UNION_MEMBERS = {"str", "SerdeObject", "LogicObject", "ToSpec"}


def _text(source: str | pathlib.Path) -> str:
    # A one-line string naming an existing file is a path; anything else is the manifest itself.
    if isinstance(source, str) and "\n" not in source and source.endswith((".yaml", ".yml")):
        candidate = pathlib.Path(source)
        if candidate.is_file():
            return candidate.read_text()
    if isinstance(source, pathlib.Path):
        return source.read_text()
    return source


def _path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _schema_problems(err: pydantic.ValidationError) -> list[errors.Problem]:
    problems: list[errors.Problem] = []
    seen = set()
    for item in err.errors():
        loc = tuple(
            p
            for p in item["loc"]
            if not (isinstance(p, str) and ("[" in p or p in _UNION_MEMBERS or p.startswith("literal[")))
        )
        if item["type"] == "extra_forbidden" and "steps" in loc and isinstance(loc[-2], int):
            message = (
                _not_yet(str(loc[-1]))
                if loc[-1] in _NOT_YET
                else f"unknown operation '{loc[-1]}' (expected one of {', '.join(_OPS)})"
            )
        elif item["type"] == "extra_forbidden":
            message = f"unknown field '{loc[-1]}'"
        elif item["type"] == "missing":
            message = "required field is missing"
        else:
            message = item["msg"].removeprefix("Value error, ")
        # A union (a serde name or object, an expression or function) fails once per alternative:
        # the first says it best.
        if (key := _path(loc)) not in seen:
            seen.add(key)
            problems.append(errors.Problem(key, message))
    paths = {p.path for p in problems}
    return [
        p
        for p in problems
        if not any(o != p.path and o.startswith(p.path + ".") for o in paths)
        or "unknown operation" in p.message
        or "not supported yet" in p.message
    ]


def _parse(text: str) -> tuple[models.StreamApp | None, list[errors.Problem]]:
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}" if mark else "YAML"
        return None, [errors.Problem("", f"not valid YAML at {where}: {getattr(err, 'problem', err)}")]
    if not isinstance(raw, Mapping):
        return None, [
            errors.Problem("", "a manifest is a YAML mapping with apiVersion, kind, metadata and spec")
        ]
    try:
        return models.StreamApp.model_validate(raw), []
    except pydantic.ValidationError as err:
        return None, _schema_problems(err)


def _spec_problems(app: models.StreamApp) -> list[errors.Problem]:
    """What the schema allows but this version cannot do: refused by name, never run as something else."""
    problems = []
    if app.spec.commit_interval_ms is not None and app.spec.topology.latency == "low":
        problems.append(
            errors.Problem(
                "spec.commitIntervalMs",
                "cannot be combined with topology.latency: low: the real-time trigger runs no "
                "micro-batches to space out; drop one of the two",
            )
        )
    if app.spec.processing_guarantee == "exactly_once_v2" and app.spec.topology.latency == "low":
        problems.append(
            errors.Problem(
                "spec.processingGuarantee",
                "exactly_once_v2 cannot be combined with topology.latency: low: the real-time trigger "
                "writes only through Spark's own Kafka sink, which is not transactional (a replay after "
                "a failure writes again); use latency: default for exactly-once, or at_least_once",
            )
        )
    return problems


def validate_manifest(source: str | pathlib.Path) -> list[errors.Problem]:
    """Every problem of the manifest (text or path), in manifest order; empty when it is valid."""
    app, problems = _parse(_text(source))
    if app is None:
        return problems
    return _spec_problems(app) + convert.Converter(app).run()[1]


def load_manifest(source: str | pathlib.Path) -> models.StreamApp:
    """The parsed manifest (text or path); raises :class:`errors.ManifestError` with every problem."""
    app, problems = _parse(_text(source))
    if app is None:
        raise errors.ManifestError(problems)
    problems = _spec_problems(app) + convert.Converter(app).run()[1]
    if problems:
        raise errors.ManifestError(problems)
    return app
