"""The driver's class-data archive: named by what it depends on, stale ones found, refusals read."""

from __future__ import annotations

import pathlib

import pytest

from streamapp.runtime.spark import cds


def test_the_archive_name_changes_with_the_jdk_or_any_jar(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    jar = tmp_path / "sink.jar"
    jar.write_bytes(b"x" * 10)
    first = cds.archive([jar])
    assert first == cds.archive([jar]), "the same inputs, the same archive"
    jar.write_bytes(b"x" * 11)  # a rebuilt jar
    assert cds.archive([jar]) != first
    home = tmp_path / "jdk"
    home.mkdir()
    (home / "release").write_text('JAVA_VERSION="21.0.1"\n')
    monkeypatch.setenv("JAVA_HOME", str(home))  # another JDK
    assert cds.archive([jar]) not in (first, cds.archive([]))
    monkeypatch.delenv("JAVA_HOME")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))  # a launch with its own conf folder
    assert cds.archive([jar]).name.split("-")[1] != first.name.split("-")[1]


def test_archives_for_other_inputs_are_stale_and_a_dump_run_writes_one(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cds, "_DIR", tmp_path)
    current = cds.archive([])
    assert cds.java_options(current) == ([], None), "no archive yet: nothing to map"
    context = current.name.split("-")[1]
    old = tmp_path / f"driver-{context}-0123456789abcdef.jsa"
    old.write_bytes(b"")
    (tmp_path / "driver-0000ffff-0123456789abcdef.jsa").write_bytes(b"")  # another launch context
    assert cds.stale(current) == [old]
    current.write_bytes(b"")
    options, log = cds.java_options(current)
    assert options[0] == f"-XX:SharedArchiveFile={current}" and log is not None
    assert cds.stale(current) == [old]
    monkeypatch.setenv(cds.DUMP_ENV, str(tmp_path / "new.jsa"))
    assert cds.java_options(current) == ([f"-XX:ArchiveClassesAtExit={tmp_path / 'new.jsa'}"], None)


def test_a_refused_archive_is_reported_with_the_jvm_s_reason(tmp_path: pathlib.Path) -> None:
    log = tmp_path / "cds.log"
    log.write_text(
        "[0.104s][warning][cds,dynamic] Unable to use shared archive. The top archive failed to load: x.jsa\n"
    )
    assert cds.check(log) == "Unable to use shared archive. The top archive failed to load: x.jsa"
    assert not log.exists()
    log.write_text("")
    assert cds.check(log) is None
    assert cds.check(None) is None


def test_a_driver_pod_s_spark_defaults_come_without_a_conf_folder_on_the_class_path(
    tmp_path: pathlib.Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from streamapp.runtime.spark import session

    defaults = tmp_path / "spark-defaults.conf"
    defaults.write_text(
        "# written by the operator\n"
        "spark.kubernetes.namespace apps\n"
        "spark.executor.instances=2\n"
        "spark.driver.host:wc-driver.apps.svc\n\n"
        "spark.executor.extraJavaOptions -Da=1 -Db=2\n"
    )
    plain = cds.archive([])
    monkeypatch.setenv(session.DEFAULTS_ENV, str(defaults))
    assert session.spark_defaults() == {
        "spark.kubernetes.namespace": "apps",
        "spark.executor.instances": "2",
        "spark.driver.host": "wc-driver.apps.svc",
        "spark.executor.extraJavaOptions": "-Da=1 -Db=2",
    }
    assert cds.archive([]) == plain, "the same launch context as a plain run: the same archive"
    defaults.write_text("spark.ok 1\njust-a-key\n")
    with pytest.raises(ValueError, match=r"spark-defaults\.conf:2: expected 'key value'"):
        session.spark_defaults()
    monkeypatch.setenv(session.DEFAULTS_ENV, str(tmp_path / "missing.conf"))
    with pytest.raises(ValueError, match=r"STREAMAPP_SPARK_DEFAULTS=.*missing\.conf: cannot read"):
        session.spark_defaults()
