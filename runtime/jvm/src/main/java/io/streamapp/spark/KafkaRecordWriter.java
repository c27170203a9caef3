package io.streamapp.spark;

import java.io.Serializable;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicReference;

import org.apache.kafka.clients.producer.Callback;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.serialization.ByteArraySerializer;
import org.apache.spark.api.java.function.VoidFunction;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

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
 *
 * <p>Rows are read as Spark's internal rows (the batch's {@code queryExecution().toRdd()}, as
 * Spark's own Kafka sink does), not as {@link Row}s: no per-row conversion to Java objects, the
 * timestamp is taken as epoch microseconds and the topic name decoded once per run of equal names.
 */
public final class KafkaRecordWriter {
  /** The producers in use, by configuration; guarded by the class lock. */
  private static final Map<Map<String, String>, Shared> PRODUCERS = new HashMap<>();

  /** A producer shared by the tasks of an executor that use the same configuration. */
  static final class Shared {
    final KafkaProducer<byte[], byte[]> producer;
    int users;
    boolean retired; // a send failed: no new task gets it, the last user closes it

    Shared(KafkaProducer<byte[], byte[]> producer) {
      this.producer = producer;
    }
  }

  private KafkaRecordWriter() {}

  /** The type of the {@code headers} column: Spark's Kafka source writes them so. */
  static final DataType HEADERS =
      DataTypes.createArrayType(
          new StructType().add("key", DataTypes.StringType).add("value", DataTypes.BinaryType));

  /** Writes every row of {@code rows}; returns when all are acknowledged (or throws). */
  public static void write(Dataset<Row> rows, Map<String, String> config) {
    final HashMap<String, String> conf = new HashMap<>(config);
    final Columns columns = Columns.of(rows.schema());
    SparkInternals.internalRows(rows)
        .toJavaRDD()
        .foreachPartition(
            (VoidFunction<Iterator<InternalRow>>) it -> writePartition(it, conf, columns.fresh()));
  }

  /**
   * Where the sink's columns are in a row, and the conversion of a row to a record. One instance
   * per task ({@link #fresh}): it remembers the last topic name decoded.
   */
  static final class Columns implements Serializable {
    private static final long serialVersionUID = 1L;
    final int key;
    final int value;
    final int headers;
    final int topic;
    final int timestamp;
    final int partition;
    private transient UTF8String lastTopic; // the rows' topic names repeat: decode each run once
    private transient String topicName;

    private Columns(int key, int value, int headers, int topic, int timestamp, int partition) {
      this.key = key;
      this.value = value;
      this.headers = headers;
      this.topic = topic;
      this.timestamp = timestamp;
      this.partition = partition;
    }

    static Columns of(StructType schema) {
      return new Columns(
          index(schema, "key", true, DataTypes.BinaryType),
          index(schema, "value", true, DataTypes.BinaryType),
          index(schema, "headers", false, HEADERS),
          index(schema, "topic", true, DataTypes.StringType),
          index(schema, "timestamp", false, DataTypes.TimestampType, DataTypes.TimestampNTZType),
          index(schema, "partition", false, DataTypes.IntegerType));
    }

    Columns fresh() {
      return new Columns(key, value, headers, topic, timestamp, partition);
    }

    ProducerRecord<byte[], byte[]> record(InternalRow row) {
      UTF8String target = row.isNullAt(topic) ? null : row.getUTF8String(topic);
      if (target == null) {
        topicName = null;
        lastTopic = null;
      } else if (!target.equals(lastTopic)) {
        lastTopic = target.clone(); // the row's buffer is reused for the next row
        topicName = lastTopic.toString();
      }
      return new ProducerRecord<>(
          topicName,
          partition >= 0 && !row.isNullAt(partition) ? row.getInt(partition) : null,
          // Spark's timestamps are epoch microseconds; Kafka's are milliseconds.
          timestamp >= 0 && !row.isNullAt(timestamp)
              ? Math.floorDiv(row.getLong(timestamp), 1000L)
              : null,
          row.isNullAt(key) ? null : row.getBinary(key),
          row.isNullAt(value) ? null : row.getBinary(value),
          headers >= 0 && !row.isNullAt(headers) ? headers(row.getArray(headers)) : null);
    }
  }

  private static int index(StructType schema, String name, boolean required, DataType... types) {
    String[] names = schema.fieldNames();
    for (int i = 0; i < names.length; i++) {
      if (names[i].equals(name)) {
        DataType type = schema.fields()[i].dataType();
        for (DataType accepted : types) {
          if (accepted.sameType(type)) {
            return i;
          }
        }
        throw new IllegalArgumentException(
            "the sink's column " + name + " is " + type.simpleString() + ", expected "
                + types[0].simpleString());
      }
    }
    if (!required) {
      return -1;
    }
    throw new IllegalArgumentException("the sink needs a column named " + name);
  }

  /**
   * The sink's producer configuration: idempotent, acks from all replicas, 5 ms linger and 256 KiB
   * batches unless {@code conf} (the app's client configuration) says otherwise; byte arrays.
   */
  static Map<String, Object> producerProps(Map<String, String> conf) {
    Map<String, Object> props = new HashMap<>();
    props.put("enable.idempotence", "true");
    props.put("acks", "all");
    props.put("linger.ms", "5");
    props.put("batch.size", "262144");
    props.putAll(conf);
    props.put("key.serializer", ByteArraySerializer.class.getName());
    props.put("value.serializer", ByteArraySerializer.class.getName());
    return props;
  }

  static synchronized Shared acquire(Map<String, String> conf) {
    Shared shared = PRODUCERS.get(conf);
    if (shared == null) {
      shared = new Shared(new KafkaProducer<>(producerProps(conf)));
      PRODUCERS.put(conf, shared);
    }
    shared.users++;
    return shared;
  }

  /**
   * A task is done with its producer. After a failed send the producer is retired (the retry, and
   * every later task, starts on a fresh one) and closed once no running task uses it any more.
   */
  static void release(Map<String, String> conf, Shared shared, boolean sendFailed) {
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

  static List<Header> headers(ArrayData array) {
    int n = array.numElements();
    if (n == 0) {
      return null;
    }
    Header[] out = new Header[n];
    int kept = 0;
    for (int i = 0; i < n; i++) {
      if (array.isNullAt(i)) {
        continue;
      }
      InternalRow h = array.getStruct(i, 2);
      byte[] value = h.isNullAt(1) ? null : h.getBinary(1);
      out[kept++] = new RecordHeader(h.getUTF8String(0).toString(), value);
    }
    return Arrays.asList(kept == n ? out : Arrays.copyOf(out, kept));
  }

  private static void writePartition(
      Iterator<InternalRow> it, Map<String, String> conf, Columns columns) throws Exception {
    Shared shared = acquire(conf);
    KafkaProducer<byte[], byte[]> producer = shared.producer;
    Failures failures = new Failures();
    try {
      while (it.hasNext() && !failures.any()) {
        ProducerRecord<byte[], byte[]> record = columns.record(it.next());
        producer.send(record, failures.of(record.topic()));
      }
      producer.flush();
      if (!failures.any()) {
        TransactionalRecordWriter.faultPoint("written"); // tests/chaos: a kill here replays a written batch
      }
    } finally {
      release(conf, shared, failures.any());
    }
    failures.check();
  }

  /** A task's failed sends: how many, and the first one's error and topic. */
  static final class Failures {
    private final AtomicReference<Exception> first = new AtomicReference<>();
    private final AtomicReference<String> firstTopic = new AtomicReference<>();
    private final AtomicLong count = new AtomicLong();

    /** The send callback of a record to {@code topic}. */
    Callback of(String topic) {
      return (metadata, error) -> {
        if (error != null) {
          count.incrementAndGet();
          if (first.compareAndSet(null, error)) {
            firstTopic.set(topic);
          }
        }
      };
    }

    boolean any() {
      return first.get() != null;
    }

    /** Fails the task if a send failed, naming the first one's topic and error, and what follows. */
    void check() {
      check("Kafka sink", "");
    }

    /** {@link #check()} for the sink named {@code sink}, saying {@code consequence} first. */
    void check(String sink, String consequence) {
      Exception error = first.get();
      if (error != null) {
        throw new RuntimeException(
            sink
                + ": "
                + count.get()
                + " record(s) failed (first: to topic "
                + firstTopic.get()
                + ": "
                + error
                + "); "
                + consequence
                + outcome(error));
      }
    }
  }

  /**
   * What happens after a record failed: Kafka's retriable errors (a leader moving, a timeout) are
   * worth Spark's task retries; any other (a record too large, an invalid or unauthorised topic)
   * would fail every retry and every restart alike. The Kafka error is in the message, not chained
   * as a cause, so the one line a user sees names the topic too.
   */
  static String outcome(Exception error) {
    return error instanceof org.apache.kafka.common.errors.RetriableException
        ? "the micro-batch will be retried"
        : "not transient: the query stops (a sink production error has one policy, fail: see"
            + " runtime/spark/EXACTLY_ONCE.md)";
  }
}
