package io.streamapp.spark;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;

import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.common.TopicPartition;
import org.apache.spark.api.java.JavaSparkContext;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * Readies the sink on the executors of a driver in standby, before its query's first micro-batch
 * (a rolling hand-over's output gap is that batch). The warm-up runs the query's plan through
 * {@link #dryRun}, which makes records and sends none; without {@link #run} the Kafka producer's
 * code would first run in that batch, which would pay for loading and compiling it, connecting
 * and fetching metadata (measured in an e2e hand-over, exactly once: the first batch's producer
 * checkout, marker read and transaction took 307 + 39 + 259 ms cold, 152 + 1 + 179 ms after
 * {@link #run}).
 *
 * <p>Each task, spread over the executors: at least once, it takes the executor's shared producer
 * for this configuration (the one the sink's tasks will use) and fetches the sink topics'
 * metadata with it; exactly once, it opens and caches the marker reader the sink's tasks use
 * (reading a committed marker is read-only) and runs a producer without a transactional id
 * through the same metadata fetch — the transactional producers themselves cannot be made ahead:
 * their {@code initTransactions()} would fence the running driver's.
 */
public final class SinkWarmUp {
  private SinkWarmUp() {}

  /** Runs {@code tasks} tasks; {@code markerTopic} null: at least once. Returns the tasks run. */
  public static long run(
      SparkSession spark,
      Map<String, String> config,
      List<String> topics,
      String markerTopic,
      String markerGroup,
      int tasks) {
    final HashMap<String, String> conf = new HashMap<>(config);
    final List<String> sinkTopics = new ArrayList<>(topics);
    List<Integer> indexes = new ArrayList<>();
    for (int i = 0; i < tasks; i++) {
      indexes.add(i);
    }
    return JavaSparkContext.fromSparkContext(spark.sparkContext())
        .parallelize(indexes, tasks)
        .mapPartitionsWithIndex(
            (Function2<Integer, Iterator<Integer>, Iterator<Integer>>)
                (index, it) -> {
                  if (markerTopic == null) {
                    KafkaRecordWriter.Shared shared = KafkaRecordWriter.acquire(conf);
                    try {
                      fetchMetadata(shared.producer, sinkTopics);
                    } finally {
                      KafkaRecordWriter.release(conf, shared, false);
                    }
                  } else {
                    TransactionalRecordWriter.markerOffset(
                        conf, markerGroup, new TopicPartition(markerTopic, index));
                    try (KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(producerProps(conf))) {
                      fetchMetadata(producer, sinkTopics);
                    }
                  }
                  return Collections.singletonList(index).iterator();
                },
            false)
        .count();
  }

  /**
   * A dry run of a write: {@code rows} (a warm-up micro-batch of the query's own plan) go the
   * writers' way — the batch's internal rows, each made into a record — and nothing is sent; with
   * {@code markerTopic} (exactly once) the marker topic's partitions are looked up on the driver
   * first, as a write does, but none is made: the warm-up's plan runs a task per executor slot,
   * not the query's. Returns the number of records made.
   */
  public static long dryRun(Dataset<Row> rows, Map<String, String> config, String markerTopic)
      throws Exception {
    final KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(rows.schema());
    org.apache.spark.rdd.RDD<InternalRow> rdd = SparkInternals.internalRows(rows);
    if (markerTopic != null) {
      TransactionalRecordWriter.ensureMarkerPartitions(
          new HashMap<>(config), markerTopic, rdd.getNumPartitions(), false);
    }
    long made = 0;
    for (Long n :
        rdd.toJavaRDD()
            .mapPartitionsWithIndex(
                (Function2<Integer, Iterator<InternalRow>, Iterator<Long>>)
                    (index, it) -> {
                      KafkaRecordWriter.Columns task = columns.fresh();
                      long count = 0;
                      for (; it.hasNext(); count++) {
                        task.record(it.next()); // made and dropped: nothing is sent
                      }
                      return Collections.singletonList(count).iterator();
                    },
                false)
            .collect()) {
      made += n;
    }
    return made;
  }

  /** The sink's configuration (a warm-up producer sends nothing: it gives up a fetch after 30 s). */
  private static Map<String, Object> producerProps(Map<String, String> conf) {
    Map<String, Object> props = KafkaRecordWriter.producerProps(conf);
    props.put("max.block.ms", Long.toString(Duration.ofSeconds(30).toMillis()));
    return props;
  }

  private static void fetchMetadata(KafkaProducer<byte[], byte[]> producer, List<String> topics) {
    for (String topic : topics) {
      producer.partitionsFor(topic);
    }
  }
}
