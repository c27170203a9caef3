package io.streamapp.spark;

import java.time.Duration;
import java.util.Collections;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Optional;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.NewPartitions;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.errors.InvalidPartitionsException;
import org.apache.kafka.common.errors.TopicExistsException;
import org.apache.kafka.common.errors.UnknownTopicOrPartitionException;
import org.apache.kafka.common.serialization.ByteArrayDeserializer;
import org.apache.spark.api.java.function.Function2;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;

/**
 * StreamApp's exactly-once Kafka sink ({@code processingGuarantee: exactly_once_v2}).
 *
 * <p>Each task of a micro-batch's write job writes its partition of the batch in one Kafka
 * transaction whose transactional id is stable: {@code <prefix>-<partition>}, the same for every
 * batch and every attempt. In that transaction it also commits a <em>marker</em>: offset {@code
 * batchId + 1} for partition {@code <partition>} of the marker topic, into a consumer group that
 * never has members ({@code sendOffsetsToTransaction}), with the query, batch and plan fingerprint
 * as metadata. Records and marker become visible together or not at all.
 *
 * <p>Before writing, a task (1) gets a producer for its id whose {@code initTransactions()} fenced
 * every earlier producer of the id — a zombie attempt of the same task, the attempt that ran before
 * a driver crash — and aborted or completed its open transaction, then (2) reads its marker with
 * {@code read_committed}. A marker at or past {@code batchId + 1} means this partition of this
 * batch is already in Kafka (a replay after a crash, or a retry of a task whose first attempt
 * committed): the task consumes its input (stateful operators commit their state as the input is
 * drained) and writes nothing. Otherwise it writes and commits. Whoever commits was the last to
 * initialise the id and read the marker after that, so two commits of one (partition, batch)
 * cannot both succeed.
 *
 * <p>Producers are cached per executor JVM by transactional id and reused across batches (one
 * {@code initTransactions()} per id and JVM, not per batch). A task checks its producer out
 * exclusively: a second attempt of the same partition in the same JVM (a zombie still running)
 * gets a new producer, whose initialisation fences the old one. A cached producer that another
 * executor fenced fails its task's transaction (nothing visible) and is closed; Spark's retry of
 * the task starts a fresh one. Spark places a partition's tasks on the same executor batch after
 * batch (Kafka consumer and state store locality), so this is rare.
 */
public final class TransactionalRecordWriter {
  /** Idle producers, by configuration and transactional id; guarded by the class lock. */
  private static final Map<List<Object>, KafkaProducer<byte[], byte[]>> IDLE = new HashMap<>();
  /** One marker reader per configuration and group; each use holds its lock. */
  private static final Map<List<Object>, KafkaConsumer<byte[], byte[]>> READERS = new HashMap<>();

  /** Partition counts of marker topics seen on the driver, by configuration and topic. */
  private static final Map<List<Object>, Integer> MARKER_PARTITIONS = new HashMap<>();

  private TransactionalRecordWriter() {}

  /**
   * Writes {@code rows} exactly once as micro-batch {@code batchId}; returns, per task that had
   * rows, {@code {partition, records written, 1 if skipped as already committed else 0}}.
   */
  public static List<long[]> write(
      Dataset<Row> rows,
      Map<String, String> config,
      String transactionalPrefix,
      String markerTopic,
      String markerGroup,
      long batchId,
      String metadata)
      throws Exception {
    final HashMap<String, String> conf = new HashMap<>(config);
    final KafkaRecordWriter.Columns columns = KafkaRecordWriter.Columns.of(rows.schema());
    org.apache.spark.rdd.RDD<InternalRow> rdd = SparkInternals.internalRows(rows);
    ensureMarkerPartitions(conf, markerTopic, rdd.getNumPartitions(), true);
    return rdd.toJavaRDD()
        .mapPartitionsWithIndex(
            (Function2<Integer, Iterator<InternalRow>, Iterator<long[]>>)
                (index, it) -> {
                  long[] outcome =
                      writePartition(
                          it,
                          conf,
                          columns.fresh(),
                          transactionalPrefix,
                          new TopicPartition(markerTopic, index),
                          markerGroup,
                          batchId,
                          metadata);
                  return outcome == null
                      ? Collections.emptyIterator()
                      : Collections.singletonList(outcome).iterator();
                },
            false)
        .collect();
  }

  /**
   * The broker accepts a transactional offset commit only for a partition that exists: the marker
   * topic (which never holds a record) gets one partition per write task, created or grown here,
   * on the driver, before the tasks run. Known counts are remembered per JVM. {@code grow} false
   * (a dry run): the topic's count is looked up and remembered; nothing is made.
   */
  static void ensureMarkerPartitions(Map<String, String> conf, String topic, int needed, boolean grow)
      throws Exception {
    List<Object> key = List.of(conf, topic);
    synchronized (MARKER_PARTITIONS) {
      Integer known = MARKER_PARTITIONS.get(key);
      if (known != null && (known >= needed || !grow)) {
        return;
      }
      Map<String, Object> props = new HashMap<>();
      for (Map.Entry<String, String> e : conf.entrySet()) {
        if (AdminClientConfig.configNames().contains(e.getKey())) {
          props.put(e.getKey(), e.getValue());
        }
      }
      try (Admin admin = Admin.create(props)) {
        int have;
        try {
          have =
              admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        } catch (ExecutionException e) {
          if (!(e.getCause() instanceof UnknownTopicOrPartitionException)) {
            throw e;
          }
          have = 0;
        }
        if (!grow) {
          if (have > 0) {
            MARKER_PARTITIONS.put(key, have);
          }
          return;
        }
        try {
          if (have == 0) {
            admin
                .createTopics(List.of(new NewTopic(topic, Optional.of(Math.max(needed, 1)), Optional.empty())))
                .all()
                .get();
          } else if (have < needed) {
            admin.createPartitions(Map.of(topic, NewPartitions.increaseTo(needed))).all().get();
          }
        } catch (ExecutionException e) {
          // Another driver (or an earlier attempt) made it meanwhile: the describe below decides.
          if (!(e.getCause() instanceof TopicExistsException)
              && !(e.getCause() instanceof InvalidPartitionsException)) {
            throw e;
          }
        }
        have = admin.describeTopics(List.of(topic)).allTopicNames().get().get(topic).partitions().size();
        if (have < needed) {
          throw new IllegalStateException(
              "Kafka sink (exactly_once_v2): the marker topic " + topic + " has " + have
                  + " partitions, " + needed + " are needed");
        }
        MARKER_PARTITIONS.put(key, have);
      }
    }
  }

  private static long[] writePartition(
      Iterator<InternalRow> it,
      Map<String, String> conf,
      KafkaRecordWriter.Columns columns,
      String prefix,
      TopicPartition marker,
      String group,
      long batchId,
      String metadata)
      throws Exception {
    if (!it.hasNext()) {
      return null; // nothing to write: no transaction (a replay has nothing either: deterministic)
    }
    String transactionalId = prefix + "-" + marker.partition();
    List<Object> key = List.of(conf, transactionalId);
    KafkaProducer<byte[], byte[]> producer = checkout(key, conf, transactionalId);
    boolean reusable = false;
    try {
      long committed = markerOffset(conf, group, marker);
      if (committed >= batchId + 1) {
        while (it.hasNext()) {
          it.next(); // drain: the state of a stateful plan commits when its input is consumed
        }
        reusable = true;
        return new long[] {marker.partition(), 0, 1};
      }
      // A cached producer fenced meanwhile by another JVM fails here (ProducerFencedException):
      // nothing of this attempt is visible, and Spark's retry of the task starts a fresh one.
      long written = writeTransaction(producer, it, columns, marker, group, batchId, metadata);
      reusable = true;
      return new long[] {marker.partition(), written, 0};
    } finally {
      checkin(key, producer, reusable);
    }
  }

  private static long writeTransaction(
      KafkaProducer<byte[], byte[]> producer,
      Iterator<InternalRow> it,
      KafkaRecordWriter.Columns columns,
      TopicPartition marker,
      String group,
      long batchId,
      String metadata) {
    KafkaRecordWriter.Failures failures = new KafkaRecordWriter.Failures();
    producer.beginTransaction();
    long written = 0;
    while (it.hasNext() && !failures.any()) {
      ProducerRecord<byte[], byte[]> record = columns.record(it.next());
      producer.send(record, failures.of(record.topic()));
      written++;
    }
    producer.flush();
    // A failure abandons the transaction: the producer is closed, the next one's init aborts it.
    failures.check("Kafka sink (exactly_once_v2)", "the transaction is aborted; ");
    producer.sendOffsetsToTransaction(
        Map.of(marker, new OffsetAndMetadata(batchId + 1, metadata)),
        new ConsumerGroupMetadata(group));
    faultPoint("in-transaction");
    producer.commitTransaction();
    faultPoint("committed");
    return written;
  }

  /**
   * Fault injection for tests/chaos only: with {@code STREAMAPP_FAULT_DIR} set, a task touches
   * {@code <dir>/<point>} and holds for {@code STREAMAPP_FAULT_HOLD_MS} (default 400), so that a
   * kill -9 can be aimed at the transaction window (before the commit) or at the gap between the
   * sink's commit and Spark's commit log (after it). Unset, it costs one getenv per transaction.
   */
  static void faultPoint(String point) {
    String dir = System.getenv("STREAMAPP_FAULT_DIR");
    if (dir == null) {
      return;
    }
    try {
      java.nio.file.Files.writeString(java.nio.file.Path.of(dir, point), Long.toString(System.nanoTime()));
      Thread.sleep(Long.parseLong(System.getenv().getOrDefault("STREAMAPP_FAULT_HOLD_MS", "400")));
    } catch (java.io.IOException | InterruptedException e) {
      throw new RuntimeException("fault injection point " + point + ": " + e, e);
    }
  }

  private static KafkaProducer<byte[], byte[]> checkout(
      List<Object> key, Map<String, String> conf, String transactionalId) {
    synchronized (TransactionalRecordWriter.class) {
      KafkaProducer<byte[], byte[]> idle = IDLE.remove(key);
      if (idle != null) {
        return idle;
      }
    }
    Map<String, Object> props = KafkaRecordWriter.producerProps(conf);
    // Above the longest micro-batch; a crashed attempt's transaction is aborted long before by
    // the restarted task's initTransactions() of the same id, so this bounds only odd cases.
    props.putIfAbsent("transaction.timeout.ms", "600000");
    props.put("enable.idempotence", "true");
    props.put("transactional.id", transactionalId);
    KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(props);
    try {
      producer.initTransactions(); // fences older producers of this id, ends their transaction
    } catch (RuntimeException e) {
      producer.close(Duration.ZERO);
      throw e;
    }
    return producer;
  }

  private static void checkin(
      List<Object> key, KafkaProducer<byte[], byte[]> producer, boolean reusable) {
    if (reusable) {
      KafkaProducer<byte[], byte[]> displaced;
      synchronized (TransactionalRecordWriter.class) {
        displaced = IDLE.put(key, producer);
      }
      if (displaced != null) {
        displaced.close(Duration.ofSeconds(5)); // a zombie's producer came back after ours
      }
    } else {
      producer.close(Duration.ZERO); // mid-transaction: the next init of the id aborts it
    }
  }

  /** The committed marker offset (read_committed: waits for a pending transactional commit). */
  static long markerOffset(Map<String, String> conf, String group, TopicPartition marker) {
    List<Object> key = List.of(conf, group);
    KafkaConsumer<byte[], byte[]> reader;
    synchronized (READERS) {
      reader = READERS.get(key);
      if (reader == null) {
        Map<String, Object> props = new HashMap<>();
        for (Map.Entry<String, String> e : conf.entrySet()) {
          if (ConsumerConfig.configNames().contains(e.getKey())) {
            props.put(e.getKey(), e.getValue()); // the connection's: bootstrap, security
          }
        }
        props.put("group.id", group);
        props.put("isolation.level", "read_committed");
        props.put("enable.auto.commit", "false");
        props.put("key.deserializer", ByteArrayDeserializer.class.getName());
        props.put("value.deserializer", ByteArrayDeserializer.class.getName());
        reader = new KafkaConsumer<>(props);
        READERS.put(key, reader);
      }
    }
    synchronized (reader) {
      try {
        OffsetAndMetadata committed =
            reader.committed(java.util.Set.of(marker), Duration.ofSeconds(60)).get(marker);
        return committed == null ? 0L : committed.offset();
      } catch (KafkaException e) {
        throw new RuntimeException(
            "Kafka sink (exactly_once_v2): cannot read the marker of " + marker + " in group "
                + group + ": " + e,
            e);
      }
    }
  }
}
