"""Prepare the build context of the operator and runtime images: wheels, jars, nothing fetched inside.

Why on the host: a build step inside the image cannot verify PyPI's or Maven Central's certificates
here (the host trusts them through its own configuration, which the image lacks), and a Docker
user's build is faster and reproducible from the same inputs. So the host resolves everything:

- ``wheels/``: the streamapp wheel and every dependency as wheels (pyspark, an sdist, is built once
  and kept in pip's cache); the streamapp wheel carries StreamApp's JVM library (``runtime/jvm``'s
  jar, which ``make jvm`` builds: checked before the wheel is made);
- ``cache/`` (runtime only): Spark's Kafka connector jars, laid out as ``$STREAMAPP_CACHE`` is
  inside the image (``/opt/streamapp/cache``), with the classpath file rewritten to those paths,
  so a driver never calls Maven.

Usage: ``python images/context.py operator|runtime OUT`` (``images/build.sh`` calls it).
"""

from __future__ import annotations

import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]
IMAGE_CACHE = pathlib.PurePosixPath("/opt/streamapp/cache")
#: The operator's dependencies: the project's, minus pyspark and what only the Spark layer needs.
OPERATOR_EXCLUDED = ("pyspark", "pandas", "pyarrow", "protobuf")


def _requirements(kind: str) -> list[str]:
    import tomllib  # noqa: PLC0415

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    if kind == "operator":
        deps = [
            d for d in deps if not d.split("[")[0].split("=")[0].split(">")[0].startswith(OPERATOR_EXCLUDED)
        ]
    return list(deps)


def _wheels(kind: str, out: pathlib.Path) -> None:
    if kind == "runtime":
        from streamapp.runtime.embedded import artifacts  # noqa: PLC0415

        artifacts.runtime_jar()  # built and current, or the wheel would ship none (or an old one)
    wheels = out / "wheels"
    wheels.mkdir(parents=True)
    pip = [sys.executable, "-m", "pip", "wheel", "--quiet", "--wheel-dir", str(wheels)]
    # The project without its declared dependencies (the operator must not pull pyspark)...
    subprocess.run([*pip, "--no-deps", str(ROOT)], check=True, env={**os.environ, "PYTHONSAFEPATH": "1"})
    # ...then exactly the dependencies this image needs, with theirs.
    subprocess.run([*pip, *_requirements(kind)], check=True, env={**os.environ, "PYTHONSAFEPATH": "1"})
    (out / "requirements.txt").write_text("\n".join(_requirements(kind)) + "\n")


def _jars(out: pathlib.Path) -> None:
    from streamapp.runtime.embedded import artifacts  # noqa: PLC0415

    cache = out / "cache"
    (cache / "jars").mkdir(parents=True)
    (cache / "classpath").mkdir()
    inside = []
    for jar in artifacts.spark_kafka_connector_jars():
        shutil.copy2(jar, cache / "jars" / jar.name)
        inside.append(str(IMAGE_CACHE / "jars" / jar.name))
    classpath = f"spark-sql-kafka-{artifacts.spark_version()}.txt"
    (cache / "classpath" / classpath).write_text(os.pathsep.join(inside))


def main(kind: str, out: pathlib.Path) -> None:
    if kind not in ("operator", "runtime"):
        raise SystemExit(f"images/context.py: unknown image {kind!r} (operator or runtime)")
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    _wheels(kind, out)
    if kind == "runtime":
        _jars(out)
    for extra in (ROOT / "images" / kind).iterdir():
        if extra.name != "Dockerfile":
            shutil.copy2(extra, out / extra.name)


if __name__ == "__main__":
    main(sys.argv[1], pathlib.Path(sys.argv[2]))
