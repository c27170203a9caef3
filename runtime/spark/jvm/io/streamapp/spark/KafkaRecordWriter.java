package io.streamapp.spark;

import java.sql.Timestamp;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.api.java.function.ForeachPartitionFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;

/**
 * StreamApp's Kafka sink, in the JVM: writes a micro-batch with explicit record timestamps.
 *
 * <p>Spark's own Kafka sink leaves the timestamp to the broker, but Kafka Streams semantics give
 * every output record the timestamp of its input (or the max over an aggregate's inputs). Rows
 * carry key, value (bytes), headers, topic, timestamp and an optional partition (null: the
 * producer's murmur2 of the key). One idempotent producer per executor JVM and configuration is
 * reused across batches; each task flushes before it ends and fails if any send failed, so Spark
 * retries the batch (at-least-once, as with Spark's own sink).
 */
public final class KafkaRecordWriter {
  private static final Map<Map<String, String>, KafkaProducer<byte[], byte[]>> PRODUCERS =
      new ConcurrentHashMap<>();

  private KafkaRecordWriter() {}

  /** Writes every row of {@code rows}; returns when all are acknowledged (or throws). */
  public static void write(Dataset<Row> rows, Map<String, String> config) {
    final HashMap<String, String> conf = new HashMap<>(config);
    final String[] names = rows.columns();
    final int key = index(names, "key");
    final int value = index(names, "value");
    final int headers = index(names, "headers");
    final int topic = index(names, "topic");
    final int timestamp = index(names, "timestamp");
    final int partition = index(names, "partition");
    rows.foreachPartition(
        (ForeachPartitionFunction<Row>)
            it -> writePartition(it, conf, key, value, headers, topic, timestamp, partition));
  }

  private static int index(String[] names, String name) {
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        return i;
      }
    }
    if (name.equals("headers") || name.equals("timestamp") || name.equals("partition")) {
      return -1;
    }
    throw new IllegalArgumentException("the sink needs a column named " + name);
  }

  private static KafkaProducer<byte[], byte[]> producer(Map<String, String> conf) {
    return PRODUCERS.computeIfAbsent(
        conf,
        c -> {
          Map<String, Object> props = new HashMap<>();
          props.put("enable.idempotence", "true");
          props.put("acks", "all");
          props.put("linger.ms", "5");
          props.put("batch.size", "262144");
          props.putAll(c);
          props.put("key.serializer", ByteArraySerializer.class.getName());
          props.put("value.serializer", ByteArraySerializer.class.getName());
          return new KafkaProducer<>(props);
        });
  }

  private static Long millis(Object stamp) {
    if (stamp == null) {
      return null;
    }
    if (stamp instanceof Timestamp) {
      return ((Timestamp) stamp).getTime();
    }
    if (stamp instanceof Instant) {
      return ((Instant) stamp).toEpochMilli();
    }
    throw new IllegalArgumentException("timestamp column holds " + stamp.getClass());
  }

  private static void writePartition(
      Iterator<Row> it,
      Map<String, String> conf,
      int key,
      int value,
      int headers,
      int topic,
      int timestamp,
      int partition)
      throws Exception {
    KafkaProducer<byte[], byte[]> producer = producer(conf);
    AtomicReference<Exception> failure = new AtomicReference<>();
    AtomicLong failed = new AtomicLong();
    while (it.hasNext() && failure.get() == null) {
      Row row = it.next();
      List<Header> recordHeaders = null;
      if (headers >= 0 && !row.isNullAt(headers)) {
        List<Row> hs = row.getList(headers);
        recordHeaders = new ArrayList<>(hs.size());
        for (Row h : hs) {
          recordHeaders.add(new RecordHeader(h.getString(0), h.isNullAt(1) ? null : (byte[]) h.get(1)));
        }
      }
      ProducerRecord<byte[], byte[]> record =
          new ProducerRecord<>(
              row.getString(topic),
              partition >= 0 && !row.isNullAt(partition) ? row.getInt(partition) : null,
              timestamp >= 0 ? millis(row.get(timestamp)) : null,
              row.isNullAt(key) ? null : (byte[]) row.get(key),
              row.isNullAt(value) ? null : (byte[]) row.get(value),
              recordHeaders);
      producer.send(
          record,
          (metadata, error) -> {
            if (error != null) {
              failed.incrementAndGet();
              failure.compareAndSet(null, error);
            }
          });
    }
    producer.flush();
    Exception error = failure.get();
    if (error != null) {
      PRODUCERS.remove(conf, producer); // the retry starts on a fresh producer
      throw new RuntimeException(
          "Kafka sink: "
              + failed.get()
              + " record(s) failed (first: "
              + error
              + "); the micro-batch will be retried",
          error);
    }
  }
}
