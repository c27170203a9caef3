package io.streamapp.spark;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import org.apache.spark.sql.connector.catalog.SupportsWrite;
import org.apache.spark.sql.connector.catalog.TableCapability;
import org.apache.spark.sql.connector.expressions.Transform;
import org.apache.spark.sql.connector.write.LogicalWriteInfo;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.connector.write.WriteBuilder;
import org.apache.spark.sql.connector.write.WriterCommitMessage;
import org.apache.spark.sql.connector.write.streaming.StreamingWrite;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.sql.util.CaseInsensitiveStringMap;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;

/**
 * The at-least-once sink as Spark's planner meets it: the registration, the write it builds, and a
 * batch's commit — the tasks' counts summed per topic for the app's metrics, the gate left.
 */
class KafkaSinkTest {
  private final BatchGate gate = new BatchGate((rows, batchId) -> {});
  private final String id = KafkaSink.register(gate, Map.of("bootstrap.servers", "b:9092"));

  @AfterEach
  void unregister() {
    KafkaSink.unregister(id);
  }

  private StreamingWrite streaming() {
    SupportsWrite table =
        (SupportsWrite)
            new KafkaSink().getTable(new StructType(), new Transform[0], Map.of(KafkaSink.OPTION, id));
    assertEquals(java.util.Set.of(TableCapability.STREAMING_WRITE), table.capabilities());
    WriteBuilder builder =
        table.newWriteBuilder(
            new LogicalWriteInfo() {
              @Override
              public CaseInsensitiveStringMap options() {
                return CaseInsensitiveStringMap.empty();
              }

              @Override
              public String queryId() {
                return "q";
              }

              @Override
              public StructType schema() {
                return KafkaRecordWriterTest.SINK;
              }
            });
    // Update and complete mode append each batch's rows (a KTable's changelog), as Spark's Kafka sink.
    assertInstanceOf(SparkInternals.UpdateAsAppendWriteBuilder.class, builder);
    assertSame(builder, ((SupportsTruncate) builder).truncate());
    return builder.build().toStreaming();
  }

  private static KafkaSink.Written task(Object... topicCountTimestamp) {
    HashMap<String, long[]> counts = new HashMap<>();
    for (int i = 0; i < topicCountTimestamp.length; i += 3) {
      counts.put(
          (String) topicCountTimestamp[i],
          new long[] {(Long) topicCountTimestamp[i + 1], (Long) topicCountTimestamp[i + 2]});
    }
    return new KafkaSink.Written(counts);
  }

  @Test
  void aCommittedBatchSumsItsTasksPerTopicAndLeavesTheGate() {
    StreamingWrite write = streaming();
    write.commit(
        4,
        new WriterCommitMessage[] {
          task("counts", 3L, 1_000L, "we\"ird\n", 1L, Long.MIN_VALUE),
          task("counts", 2L, 2_500L),
          null, // a task without rows
        });
    assertEquals("{\"counts\":[5,2500],\"we\\\"ird\\u000a\":[1,null]}", sorted(KafkaSink.written(id, 4)));
    assertEquals(4, gate.lastDone());
    assertNull(KafkaSink.written(id, 5));
    write.abort(5, new WriterCommitMessage[0]);
    assertEquals(5, gate.lastDone());
    assertNull(KafkaSink.written(id, 5)); // an aborted batch wrote nothing the app counts
  }

  @Test
  void onlyTheLastBatchesAreKept() {
    StreamingWrite write = streaming();
    for (long batch = 0; batch <= KafkaSink.KEPT; batch++) {
      write.commit(batch, new WriterCommitMessage[] {task("t", 1L, batch)});
    }
    assertNull(KafkaSink.written(id, 0));
    assertEquals("{\"t\":[1,1]}", KafkaSink.written(id, 1));
  }

  @Test
  void aSinkNotStartedByTheRuntimeIsRefusedByName() {
    IllegalArgumentException missing =
        assertThrows(
            IllegalArgumentException.class,
            () -> new KafkaSink().getTable(new StructType(), new Transform[0], Map.of()));
    assertEquals(
        "StreamApp's Kafka sink is started by the runtime (runner.start_kafka): option streamapp.sink is missing",
        missing.getMessage());
    KafkaSink.unregister(id);
    IllegalArgumentException gone =
        assertThrows(
            IllegalArgumentException.class,
            () -> new KafkaSink().getTable(new StructType(), new Transform[0], Map.of(KafkaSink.OPTION, id)));
    assertEquals(
        "StreamApp's Kafka sink is started by the runtime (runner.start_kafka): option streamapp.sink names"
            + " no registered sink: " + id,
        gone.getMessage());
    assertNull(KafkaSink.written(id, 0));
  }

  /** The JSON object with its members in a fixed order (the sums are a hash map). */
  private static String sorted(String json) {
    String body = json.substring(1, json.length() - 1);
    List<String> members = new java.util.ArrayList<>(List.of(body.split("(?<=]),")));
    members.sort(null);
    return "{" + String.join(",", members) + "}";
  }
}
