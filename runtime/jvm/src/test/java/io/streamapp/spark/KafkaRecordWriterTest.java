package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertDoesNotThrow;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.errors.RecordTooLargeException;
import org.apache.kafka.common.errors.TimeoutException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;
import org.junit.jupiter.api.Test;

/** A sink row made into a Kafka record, the producer's configuration, and failed sends. */
class KafkaRecordWriterTest {
  static final StructType SINK =
      new StructType()
          .add("key", DataTypes.BinaryType)
          .add("value", DataTypes.BinaryType)
          .add("headers", KafkaRecordWriter.HEADERS)
          .add("topic", DataTypes.StringType)
          .add("timestamp", DataTypes.TimestampType)
          .add("partition", DataTypes.IntegerType);

  private static byte[] bytes(String text) {
    return text.getBytes(StandardCharsets.UTF_8);
  }

  private static InternalRow row(
      String key, String value, Object headers, UTF8String topic, Long micros, Integer partition) {
    return new GenericInternalRow(
        new Object[] {key == null ? null : bytes(key), value == null ? null : bytes(value), headers, topic, micros,
          partition});
  }

  private static GenericArrayData headers(Object... pairs) {
    Object[] elements = new Object[pairs.length / 2];
    for (int i = 0; i < elements.length; i++) {
      String name = (String) pairs[2 * i];
      elements[i] =
          name == null
              ? null
              : new GenericInternalRow(new Object[] {UTF8String.fromString(name), pairs[2 * i + 1]});
    }
    return new GenericArrayData(elements);
  }

  @Test
  void aRowBecomesARecordWithItsTimestampInMillisecondsAndItsHeaders() {
    KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(SINK).fresh();
    ProducerRecord<byte[], byte[]> record =
        columns.record(
            row("k", "v", headers("trace", bytes("t-1"), null, null, "empty", null),
                UTF8String.fromString("out"), 1_234_567_999L, 2));
    assertEquals("out", record.topic());
    assertEquals(2, record.partition());
    assertEquals(1_234_567L, record.timestamp()); // microseconds, floored to milliseconds
    assertArrayEquals(bytes("k"), record.key());
    assertArrayEquals(bytes("v"), record.value());
    Header[] sent = record.headers().toArray();
    assertEquals(2, sent.length); // the null element is skipped
    assertEquals("trace", sent[0].key());
    assertArrayEquals(bytes("t-1"), sent[0].value());
    assertEquals("empty", sent[1].key());
    assertNull(sent[1].value());
  }

  @Test
  void nullColumnsLeaveTheChoiceToTheProducerAndBroker() {
    KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(SINK).fresh();
    ProducerRecord<byte[], byte[]> tombstone =
        columns.record(row("k", null, headers(), UTF8String.fromString("out"), null, null));
    assertNull(tombstone.value());
    assertNull(tombstone.partition()); // the producer's murmur2 of the key
    assertNull(tombstone.timestamp());
    assertEquals(0, tombstone.headers().toArray().length);
  }

  @Test
  void optionalColumnsMayBeAbsent() {
    StructType minimal =
        new StructType()
            .add("topic", DataTypes.StringType)
            .add("value", DataTypes.BinaryType)
            .add("key", DataTypes.BinaryType);
    KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(minimal).fresh();
    ProducerRecord<byte[], byte[]> record =
        columns.record(new GenericInternalRow(new Object[] {UTF8String.fromString("t"), bytes("v"), null}));
    assertEquals("t", record.topic());
    assertNull(record.key());
    assertNull(record.timestamp());
  }

  @Test
  void aTopicNameIsReadAgainWhenTheRowBufferChanges() {
    // Spark reuses an unsafe row's buffer for the next row, and a string column is a view of it
    // (here at offset 8 of the buffer): the writer must not keep the view.
    byte[] buffer = bytes("........aaa");
    UTF8String topic = UTF8String.fromBytes(buffer, 8, 3);
    KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(SINK).fresh();
    ProducerRecord<byte[], byte[]> first = columns.record(row("k", "v", null, topic, null, null));
    System.arraycopy(bytes("bbb"), 0, buffer, 8, 3);
    ProducerRecord<byte[], byte[]> second = columns.record(row("k", "v", null, topic, null, null));
    assertEquals("aaa", first.topic());
    assertEquals("bbb", second.topic());
  }

  @Test
  void aSchemaWithoutTheSinkColumnsIsRefusedByName() {
    IllegalArgumentException missing =
        assertThrows(
            IllegalArgumentException.class,
            () -> KafkaRecordWriter.Columns.of(new StructType().add("value", DataTypes.BinaryType)));
    assertEquals("the sink needs a column named key", missing.getMessage());
    IllegalArgumentException typed =
        assertThrows(
            IllegalArgumentException.class,
            () ->
                KafkaRecordWriter.Columns.of(
                    new StructType()
                        .add("key", DataTypes.StringType)
                        .add("value", DataTypes.BinaryType)
                        .add("topic", DataTypes.StringType)));
    assertEquals("the sink's column key is string, expected binary", typed.getMessage());
  }

  @Test
  void theProducerIsIdempotentWithBytesUnlessTheAppSaysOtherwise() {
    Map<String, Object> props =
        KafkaRecordWriter.producerProps(
            Map.of("bootstrap.servers", "b:9092", "linger.ms", "20", "value.serializer", "x.Mine"));
    assertEquals("true", props.get("enable.idempotence"));
    assertEquals("all", props.get("acks"));
    assertEquals("20", props.get("linger.ms"));
    assertEquals("262144", props.get("batch.size"));
    assertEquals("b:9092", props.get("bootstrap.servers"));
    assertEquals(ByteArraySerializer.class.getName(), props.get("value.serializer")); // rows are bytes
  }

  @Test
  void failedSendsFailTheTaskNamingTheFirstTopicAndWhetherARetryHelps() {
    KafkaRecordWriter.Failures transientFailures = new KafkaRecordWriter.Failures();
    transientFailures.of("fine").onCompletion(null, null);
    assertDoesNotThrow(() -> transientFailures.check());
    transientFailures.of("counts").onCompletion(null, new TimeoutException("no leader"));
    transientFailures.of("other").onCompletion(null, new TimeoutException("no leader"));
    RuntimeException retried = assertThrows(RuntimeException.class, transientFailures::check);
    assertTrue(
        retried.getMessage().startsWith("Kafka sink: 2 record(s) failed (first: to topic counts:"),
        retried.getMessage());
    assertTrue(retried.getMessage().endsWith("the micro-batch will be retried"), retried.getMessage());

    KafkaRecordWriter.Failures permanent = new KafkaRecordWriter.Failures();
    permanent.of("big").onCompletion(null, new RecordTooLargeException("1 MiB"));
    RuntimeException stops =
        assertThrows(RuntimeException.class, () -> permanent.check("Kafka sink (exactly_once_v2)", "aborted; "));
    assertTrue(stops.getMessage().contains("to topic big"), stops.getMessage());
    assertTrue(stops.getMessage().contains("aborted; not transient: the query stops"), stops.getMessage());
  }

  @Test
  void headersOfAnEmptyArrayAreNone() {
    assertNull(KafkaRecordWriter.headers(new GenericArrayData(new Object[0])));
    assertEquals(
        List.of("h"),
        KafkaRecordWriter.headers(headers("h", bytes("1"))).stream().map(Header::key).toList());
  }
}
