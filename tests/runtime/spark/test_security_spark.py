"""Spark reads and writes Kafka through SASL_SSL and mutual TLS, with inline PEM options only.

A small stateless topology runs Kafka → Spark → Kafka on the secure broker's listeners, its source
with the ``kafka.*`` options and its JVM sink with the producer configuration that
:meth:`security.Credentials.java` builds; the secrets in them are redacted by Spark.
"""

from __future__ import annotations

import pathlib
import re
import time
from typing import TYPE_CHECKING

import pytest

from streamapp.runtime import Serdes, StreamApp, StreamsBuilder, StreamsConfig
from streamapp.runtime.app import State
from streamapp.runtime.kafka import admin, security
from streamapp.runtime.spark.session import REDACTION_REGEX
from streamapp.runtime.testing.fixtures import SecureKafka

if TYPE_CHECKING:
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming.query import StreamingQuery

T0 = 1_700_000_000_000
INPUT = [
    admin.Record(b"a", b"hello", (("trace", b"1"),), T0 + 1),
    admin.Record(b"b", b"no", (), T0 + 2),
    admin.Record(b"c", b"spark", (), T0 + 3),
]
EXPECTED = [
    (b"a", b"HELLO", T0 + 1, (("trace", b"1"),)),
    (b"c", b"SPARK", T0 + 3, ()),
]


def _start(
    spark: SparkSession, bootstrap: str, credentials: security.Credentials, source: str, sink: str, ckpt: str
) -> StreamingQuery:
    """The Spark layer alone (no StreamApp): a query whose credentials are wrong fails in Spark."""
    from streamapp.runtime.spark import compiler, kafka_io, runner

    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(source).filter("length(value) > 2").map_values("upper(value)").to(sink)
    java = credentials.java()
    compiled = compiler.compile_topology(
        builder.build(),
        read=lambda topics: kafka_io.read_stream(
            spark, bootstrap=bootstrap, topics=topics, client_config=java
        ),
    )
    return runner.start_kafka(
        compiled.plan,
        bootstrap=bootstrap,
        checkpoint=ckpt,
        trigger=runner.Trigger("available-now"),
        producer_config=java,
    )


def _topics(bootstrap: str, credentials: security.Credentials, stem: str) -> tuple[str, str]:
    source, sink = f"{stem}-in-{time.time_ns()}", f"{stem}-out-{time.time_ns()}"
    admin.create_topics(bootstrap, {source: 2, sink: 2}, client_config=credentials.librdkafka())
    admin.produce(bootstrap, source, INPUT, client_config=credentials.librdkafka())
    return source, sink


@pytest.mark.parametrize("listener", ["sasl_ssl", "mutual_tls"])
def test_spark_reads_and_writes_through_the_secure_listener(
    spark: SparkSession, secure_kafka: SecureKafka, tmp_path: pathlib.Path, listener: str
) -> None:
    if listener == "sasl_ssl":
        bootstrap, credentials = secure_kafka.sasl_bootstrap, secure_kafka.sasl("SCRAM-SHA-512")
    else:
        bootstrap, credentials = secure_kafka.mtls_bootstrap, secure_kafka.mutual_tls()
    source, sink = _topics(bootstrap, credentials, listener.replace("_", "-"))
    builder = StreamsBuilder(default_key_serde=Serdes.String(), default_value_serde=Serdes.String())
    builder.stream(source).filter("length(value) > 2").map_values("upper(value)").to(sink)
    config = StreamsConfig(
        bootstrap_servers=bootstrap,
        checkpoint_location=str(tmp_path / "ckpt"),
        credentials=credentials,
        drain=True,
    )
    app = StreamApp(builder.build(), config, spark=spark)
    app.start()
    assert app.await_termination(180)
    assert app.state is State.NOT_RUNNING, app.error
    assert app.progress.records_read == {source: 3}
    assert app.progress.records_written == {sink: 2}
    out = admin.consume(bootstrap, sink, expected=2, client_config=credentials.librdkafka())
    assert sorted((r.key, r.value, r.timestamp, r.headers) for r in out) == EXPECTED
    # Nothing more arrives: exactly the two records.
    assert len(admin.consume(bootstrap, sink, client_config=credentials.librdkafka())) == 2


def test_spark_query_with_a_wrong_password_fails_naming_it(
    spark: SparkSession, secure_kafka: SecureKafka, tmp_path: pathlib.Path
) -> None:
    good = secure_kafka.sasl("SCRAM-SHA-256")
    source, sink = _topics(secure_kafka.sasl_bootstrap, good, "wrong-password")
    bad = secure_kafka.sasl("SCRAM-SHA-256", password="not-the-password")
    from pyspark.errors import StreamingQueryException

    query = _start(spark, secure_kafka.sasl_bootstrap, bad, source, sink, str(tmp_path / "ckpt"))
    with pytest.raises(StreamingQueryException):
        query.awaitTermination(180)
    failure = str(query.exception())
    assert "SaslAuthenticationException" in failure, failure
    assert "invalid credentials with SASL mechanism SCRAM-SHA-256" in failure, failure
    assert "not-the-password" not in failure


def test_spark_redacts_the_secret_options(spark: SparkSession, secure_kafka: SecureKafka) -> None:
    from streamapp.runtime.spark import kafka_io

    options = kafka_io.client_options({**secure_kafka.sasl().java(), **secure_kafka.mutual_tls().java()})
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pairs = jvm.java.util.ArrayList()
    for key, value in options.items():
        pairs.add(jvm.scala.Tuple2(key, value))
    scala_pairs = jvm.scala.jdk.javaapi.CollectionConverters.asScala(pairs).toSeq()
    redacted_seq = jvm.org.apache.spark.util.Utils.redact(spark.sparkContext._jsc.sc().conf(), scala_pairs)
    redacted = {t._1(): t._2() for t in jvm.scala.jdk.javaapi.CollectionConverters.asJava(redacted_seq)}
    hidden = {k for k, v in redacted.items() if v != options[k]}
    secret = {"kafka.sasl.jaas.config", "kafka.ssl.keystore.key"}
    assert all(re.search(REDACTION_REGEX, key) for key in secret), "hidden by name, whatever the value"
    # Spark also hides an option whose value matches: Spark's own terms can turn up in a PEM
    # certificate's base64 by chance (a CI run met one); only such a value may hide more.
    by_value = {k for k, v in options.items() if re.search(REDACTION_REGEX, v)}
    assert hidden == secret | by_value
    assert all("redacted" in redacted[k] for k in hidden)
    assert not any(re.search(REDACTION_REGEX, k) for k in options.keys() - secret)
