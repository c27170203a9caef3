package io.streamapp.spark;

import java.sql.Timestamp;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
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
 * shared by its tasks and reused across batches; each task flushes before it ends and fails if any
 * send failed, so the micro-batch fails and is not committed (at-least-once, as with Spark's own
 * sink: a retried or replayed batch is written again). A producer that saw a failed send is
 * replaced, and closed when its last task is done.
 */
public final class KafkaRecordWriter {
  /** The producers in use, by configuration; guarded by the class lock. */
  private static final Map<Map<String, String>, Shared> PRODUCERS = new HashMap<>();

  /** A producer shared by the tasks of an executor that use the same configuration. */
  private static final class Shared {
    final KafkaProducer<byte[], byte[]> producer;
    int users;
    boolean retired; // a send failed: no new task gets it, the last user closes it

    Shared(KafkaProducer<byte[], byte[]> producer) {
      this.producer = producer;
    }
  }

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

  private static synchronized Shared acquire(Map<String, String> conf) {
    Shared shared = PRODUCERS.get(conf);
    if (shared == null) {
      Map<String, Object> props = new HashMap<>();
      props.put("enable.idempotence", "true");
      props.put("acks", "all");
      props.put("linger.ms", "5");
      props.put("batch.size", "262144");
      props.putAll(conf);
      props.put("key.serializer", ByteArraySerializer.class.getName());
      props.put("value.serializer", ByteArraySerializer.class.getName());
      shared = new Shared(new KafkaProducer<>(props));
      PRODUCERS.put(conf, shared);
    }
    shared.users++;
    return shared;
  }

  /**
   * A task is done with its producer. After a failed send the producer is retired (the retry, and
   * every later task, starts on a fresh one) and closed once no running task uses it any more.
   */
  private static void release(Map<String, String> conf, Shared shared, boolean sendFailed) {
    boolean close;
    synchronized (KafkaRecordWriter.class) {
      shared.users--;
      if (sendFailed && !shared.retired) {
        shared.retired = true;
        PRODUCERS.remove(conf, shared);
      }
      close = shared.retired && shared.users == 0;
    }
    if (close) {
      shared.producer.close(Duration.ofSeconds(5)); // its users have flushed (or failed)
    }
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
    Shared shared = acquire(conf);
    KafkaProducer<byte[], byte[]> producer = shared.producer;
    AtomicReference<Exception> failure = new AtomicReference<>();
    AtomicLong failed = new AtomicLong();
    try {
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
    } finally {
      release(conf, shared, failure.get() != null);
    }
    Exception error = failure.get();
    if (error != null) {
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
