package io.streamapp.spark;

import java.io.Serializable;
import java.util.EnumSet;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicLong;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.Table;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.catalog.TableProvider;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.DataWriter;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.PhysicalWriteInfo;
import org.apache.spark.sql.connector.write.Write;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingDataWriterFactory;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;

/**
 * StreamApp's at-least-once Kafka sink as a streaming data source of Spark ({@code
 * writeStream.format("io.streamapp.spark.KafkaSink")}), the way Spark's own Kafka sink is one: the
 * write is planned with the micro-batch (no {@code foreachBatch}, whose batch is a new Dataset
 * planned again inside the sink) and each task writes its rows through {@link KafkaRecordWriter}'s
 * shared producer, record timestamps and headers included.
 *
 * <p>Python registers a {@link BatchGate} and the producer configuration ({@link #register}) and
 * names the registration in the option {@value #OPTION}. The gate is entered on the driver before
 * a batch's tasks start (a closed gate parks the batch there, the fence refuses it there) and left
 * when Spark commits or aborts the batch. Each task reports the records it wrote per topic and their
 * largest timestamp; the driver keeps the sums of the last batches ({@link #written}).
 */
public final class KafkaSink implements TableProvider {
  /** The option naming the registration ({@link #register}). */
  public static final String OPTION = "streamapp.sink";

  /** The batches whose written counts are kept per registration. */
  static final int KEPT = 200;

  private static final Map<String, Registered> REGISTERED = new ConcurrentHashMap<>();
  private static final AtomicLong IDS = new AtomicLong();

  /** What one query's sink needs on the driver. */
  static final class Registered {
    final BatchGate gate;
    final HashMap<String, String> config;
    /** batch id → topic → {records, largest timestamp (ms, Long.MIN_VALUE: none)} */
    final Map<Long, Map<String, long[]>> written =
        new LinkedHashMap<>() {
          private static final long serialVersionUID = 1L;

          @Override
          protected boolean removeEldestEntry(Map.Entry<Long, Map<String, long[]>> eldest) {
            return size() > KEPT;
          }
        };

    Registered(BatchGate gate, Map<String, String> config) {
      this.gate = gate;
      this.config = new HashMap<>(config);
    }
  }

  public KafkaSink() {}

  /** Registers a query's gate and producer configuration; returns the value of {@value #OPTION}. */
  public static String register(BatchGate gate, Map<String, String> config) {
    String id = "sink-" + IDS.incrementAndGet();
    REGISTERED.put(id, new Registered(gate, config));
    return id;
  }

  /** Forgets a registration (its query has ended). */
  public static void unregister(String id) {
    REGISTERED.remove(id);
  }

  /**
   * The records batch {@code batchId} wrote, per topic, as a JSON object {@code {"topic": [records,
   * largest timestamp (ms) or null]}}; null if the batch is not (or no longer) known.
   */
  public static String written(String id, long batchId) {
    Registered registered = REGISTERED.get(id);
    if (registered == null) {
      return null;
    }
    Map<String, long[]> counts;
    synchronized (registered.written) {
      counts = registered.written.get(batchId);
    }
    if (counts == null) {
      return null;
    }
    StringBuilder out = new StringBuilder("{");
    for (Map.Entry<String, long[]> entry : counts.entrySet()) {
      long[] cell = entry.getValue();
      out.append(out.length() > 1 ? "," : "");
      quoted(out, entry.getKey()).append(':').append('[');
      out.append(cell[0]).append(',');
      out.append(cell[1] == Long.MIN_VALUE ? "null" : Long.toString(cell[1])).append(']');
    }
    return out.append('}').toString();
  }

  /** {@code text} as a JSON string (a topic a record named may hold any character). */
  private static StringBuilder quoted(StringBuilder out, String text) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      if (c == '"' || c == '\\') {
        out.append('\\').append(c);
      } else if (c < 0x20) {
        out.append(String.format("\\u%04x", (int) c));
      } else {
        out.append(c);
      }
    }
    return out.append('"');
  }

  @Override
  public StructType inferSchema(CaseInsensitiveStringMap options) {
    return new StructType(); // a sink: the rows' schema comes with each write
  }

  @Override
  public boolean supportsExternalMetadata() {
    return true;
  }

  @Override
  public Table getTable(StructType schema, Transform[] partitioning, Map<String, String> properties) {
    String id = properties.get(OPTION);
    Registered registered = id == null ? null : REGISTERED.get(id);
    if (registered == null) {
      throw new IllegalArgumentException(
          "StreamApp's Kafka sink is started by the runtime (runner.start_kafka): option "
              + OPTION
              + " "
              + (id == null ? "is missing" : "names no registered sink: " + id));
    }
    return new SinkTable(registered);
  }

  static final class SinkTable implements Table, SupportsWrite {
    private final Registered registered;

    SinkTable(Registered registered) {
      this.registered = registered;
    }

    @Override
    public String name() {
      return "streamapp-kafka-sink";
    }

    @Override
    public StructType schema() {
      return new StructType();
    }

    @Override
    public Set<TableCapability> capabilities() {
      return EnumSet.of(TableCapability.STREAMING_WRITE);
    }

    @Override
    public WriteBuilder newWriteBuilder(LogicalWriteInfo info) {
      return new Builder(registered, info.schema());
    }
  }

  /** Update mode writes what each batch emits, as append does (a KTable's changelog). */
  static final class Builder implements SparkInternals.UpdateAsAppendWriteBuilder {
    private final Registered registered;
    private final StructType schema;

    Builder(Registered registered, StructType schema) {
      this.registered = registered;
      this.schema = schema;
    }

    @Override
    public WriteBuilder truncate() {
      return this; // a topic is not truncated: complete mode appends each batch's rows
    }

    @Override
    public Write build() {
      KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(schema); // fails on a bad schema
      return new Write() {
        @Override
        public String description() {
          return "StreamApp Kafka sink";
        }

        @Override
        public StreamingWrite toStreaming() {
          return new Streaming(registered, columns);
        }
      };
    }
  }

  static final class Streaming implements StreamingWrite {
    private final Registered registered;
    private final KafkaRecordWriter.Columns columns;

    Streaming(Registered registered, KafkaRecordWriter.Columns columns) {
      this.registered = registered;
      this.columns = columns;
    }

    @Override
    public StreamingDataWriterFactory createStreamingWriterFactory(PhysicalWriteInfo info) {
      // Spark's stream thread, before the batch's tasks: the gate holds or refuses the batch here.
      registered.gate.enter(SparkInternals.currentBatchId());
      return new Factory(registered.config, columns);
    }

    @Override
    public boolean useCommitCoordinator() {
      return false; // at least once: a retried task writes again, as Spark's Kafka sink does
    }

    @Override
    public void commit(long epochId, WriterCommitMessage[] messages) {
      Map<String, long[]> sums = new HashMap<>();
      for (WriterCommitMessage message : messages) {
        if (message instanceof Written written) {
          for (Map.Entry<String, long[]> entry : written.counts.entrySet()) {
            long[] sum = sums.computeIfAbsent(entry.getKey(), t -> new long[] {0, Long.MIN_VALUE});
            sum[0] += entry.getValue()[0];
            sum[1] = Math.max(sum[1], entry.getValue()[1]);
          }
        }
      }
      synchronized (registered.written) {
        registered.written.put(epochId, sums);
      }
      registered.gate.exit(epochId);
    }

    @Override
    public void abort(long epochId, WriterCommitMessage[] messages) {
      registered.gate.exit(epochId);
    }
  }

  static final class Factory implements StreamingDataWriterFactory {
    private static final long serialVersionUID = 1L;
    private final HashMap<String, String> config;
    private final KafkaRecordWriter.Columns columns;

    Factory(HashMap<String, String> config, KafkaRecordWriter.Columns columns) {
      this.config = config;
      this.columns = columns;
    }

    @Override
    public DataWriter<InternalRow> createWriter(int partitionId, long taskId, long epochId) {
      return new Writer(config, columns.fresh());
    }
  }

  /** A task's records per topic: {records, largest timestamp in ms}. */
  static final class Written implements WriterCommitMessage, Serializable {
    private static final long serialVersionUID = 1L;
    final HashMap<String, long[]> counts;

    Written(HashMap<String, long[]> counts) {
      this.counts = counts;
    }
  }

  static final class Writer implements DataWriter<InternalRow> {
    private final Map<String, String> config;
    private final KafkaRecordWriter.Columns columns;
    private final KafkaRecordWriter.Shared shared;
    private final KafkaProducer<byte[], byte[]> producer;
    private final KafkaRecordWriter.Failures failures = new KafkaRecordWriter.Failures();
    private final HashMap<String, long[]> counts = new HashMap<>();
    private String lastTopic; // the rows' topics repeat: one map lookup per run of equal names
    private long[] lastCell;
    private boolean released;

    Writer(Map<String, String> config, KafkaRecordWriter.Columns columns) {
      this.config = config;
      this.columns = columns;
      this.shared = KafkaRecordWriter.acquire(config);
      this.producer = shared.producer;
    }

    @Override
    public void write(InternalRow row) {
      failures.check(); // a send failed already: fail the task now
      ProducerRecord<byte[], byte[]> record = columns.record(row);
      String topic = record.topic();
      if (topic != lastTopic) { // the writer's columns return the same String for a run of equal names
        lastTopic = topic;
        lastCell = counts.computeIfAbsent(topic, t -> new long[] {0, Long.MIN_VALUE});
      }
      lastCell[0]++;
      Long timestamp = record.timestamp();
      if (timestamp != null && timestamp > lastCell[1]) {
        lastCell[1] = timestamp;
      }
      producer.send(record, failures.of(topic));
    }

    @Override
    public WriterCommitMessage commit() {
      producer.flush();
      failures.check();
      TransactionalRecordWriter.faultPoint("written"); // tests/chaos: a kill here replays a written batch
      return new Written(counts);
    }

    @Override
    public void abort() {}

    @Override
    public void close() {
      if (!released) {
        released = true;
        KafkaRecordWriter.release(config, shared, failures.any());
      }
    }
  }
}
