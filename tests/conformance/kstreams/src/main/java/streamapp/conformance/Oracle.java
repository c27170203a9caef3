package streamapp.conformance;

import java.io.BufferedReader;
import java.io.File;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;

import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.ListOffsetsResult;
import org.apache.kafka.clients.admin.OffsetSpec;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.TopicPartitionInfo;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsConfig;

/**
 * Runs StreamApp topologies in Kafka Streams, many at once in one JVM, and says when each has
 * processed all of its input: the conformance suite's oracle.
 *
 * <p>Usage: {@code Oracle BOOTSTRAP STATE_DIR}, then one line per run on stdin:
 * {@code APP_ID GRAPH_JSON_FILE}, ended by EOF. The file holds the run's logical graph as
 * runtime/topology/export.py writes it, on the run's real topics; {@link GraphBuilder} builds it.
 * A graph the oracle cannot build prints {@code {"run": APP_ID, "error": MESSAGE}} and the other
 * runs go on. Every other run is its own KafkaStreams instance (one thread, record caches off, so
 * its changelog is deterministic). When a run's committed offsets reach the end of its input and
 * internal topics, it prints one JSON line {@code {"run": APP_ID, "dropped": N, "description":
 * ...}} and closes; then "done". {@code dropped} is Kafka Streams' task metric
 * dropped-records-total summed over the tasks. A run whose KafkaStreams goes to ERROR fails the
 * whole Oracle (exit status non-zero).
 */
public final class Oracle {
  private static final ObjectMapper JSON = new ObjectMapper();

  /** A started run; {@code inputs}: the topics its tasks consume (not a global table's). */
  private record Run(String appId, KafkaStreams streams, String description, List<String> inputs) {}

  public static void main(String[] args) throws Exception {
    String bootstrap = args[0], stateDir = args[1];
    List<Run> runs = new ArrayList<>();
    BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
    for (String line = in.readLine(); line != null; line = in.readLine()) {
      if (line.isBlank()) {
        continue;
      }
      String[] f = line.trim().split("\\s+");
      if (f.length != 2) {
        throw new IllegalArgumentException("expected APP_ID GRAPH_JSON_FILE, got: " + line);
      }
      Run run = build(bootstrap, stateDir, f[0], new File(f[1]));
      if (run != null) {
        runs.add(run);
      }
    }
    for (Run run : runs) {
      run.streams.start();
    }
    await(bootstrap, runs);
    System.out.println("done");
  }

  /** The run of one graph, or null (and its error line printed) when the graph cannot be built. */
  private static Run build(String bootstrap, String stateDir, String appId, File graph) {
    GraphBuilder.Result built;
    try {
      built = GraphBuilder.build(JSON.readTree(graph));
    } catch (Refused e) {
      print(JSON.createObjectNode().put("run", appId).put("error", e.getMessage()));
      return null;
    } catch (Exception e) {
      // Not a refusal: a graph Kafka Streams rejects, an unreadable file, or an oracle bug.
      print(JSON.createObjectNode().put("run", appId).put("error", e.toString()));
      return null;
    }
    KafkaStreams streams = new KafkaStreams(built.topology(), props(bootstrap, stateDir, appId));
    return new Run(appId, streams, built.topology().describe().toString(), built.inputs());
  }

  /** Reports and closes each run once it has consumed all of its input. */
  private static void await(String bootstrap, List<Run> runs) throws Exception {
    Properties adminProps = new Properties();
    adminProps.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    long deadline = System.currentTimeMillis() + 600_000;
    try (Admin admin = Admin.create(adminProps)) {
      Map<String, Integer> settled = new HashMap<>();
      List<Run> pending = new ArrayList<>(runs);
      while (!pending.isEmpty()) {
        if (System.currentTimeMillis() > deadline) {
          throw new IllegalStateException("runs did not finish in 10 minutes: " + pending);
        }
        Thread.sleep(300);
        for (Run run : new ArrayList<>(pending)) {
          if (run.streams.state() == KafkaStreams.State.ERROR) {
            throw new IllegalStateException(run.appId + " failed");
          }
          // Caught up twice in a row: nothing was in flight between the two looks.
          int n = caughtUp(admin, run) ? settled.merge(run.appId, 1, Integer::sum) : 0;
          settled.put(run.appId, n);
          if (n >= 2) {
            print(report(run));
            run.streams.close();
            pending.remove(run);
          }
        }
      }
    }
  }

  private static void print(ObjectNode line) {
    System.out.println(line.toString());
    System.out.flush();
  }

  private static Properties props(String bootstrap, String stateDir, String appId) {
    Properties p = new Properties();
    p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
    p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
    p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
    p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, "0");
    p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, "100");
    // Emit-final windows: emit on every record that closes one, not at most once a second
    // (wall-clock throttling would make the output depend on timing).
    p.put(StreamsConfig.InternalConfig.EMIT_INTERVAL_MS_KSTREAMS_WINDOWED_AGGREGATION, 0L);
    // Stream-stream left/outer joins: emit a closed window's unmatched records as soon as stream
    // time passes it, not at most once a second of wall-clock time (join_scenarios.py).
    p.put("__emit.interval.ms.kstreams.outer.join.spurious.results.fix__", 0L);
    p.put(StreamsConfig.consumerPrefix("auto.offset.reset"), "earliest");
    p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, "1");
    return p;
  }

  private static boolean caughtUp(Admin admin, Run run) throws Exception {
    if (run.streams.state() != KafkaStreams.State.RUNNING) {
      return false;
    }
    Set<String> topics = new HashSet<>(run.inputs);
    String prefix = run.appId + "-";
    for (String t : admin.listTopics().names().get()) {
      // Repartition topics, and a foreign-key join's subscription and response topics.
      if (t.startsWith(prefix) && (t.endsWith("-repartition") || t.endsWith("-topic"))) {
        topics.add(t);
      }
    }
    Map<TopicPartition, OffsetAndMetadata> committed =
        admin.listConsumerGroupOffsets(run.appId).partitionsToOffsetAndMetadata().get();
    Map<TopicPartition, OffsetSpec> latest = new HashMap<>();
    for (TopicDescription d : admin.describeTopics(topics).allTopicNames().get().values()) {
      for (TopicPartitionInfo p : d.partitions()) {
        latest.put(new TopicPartition(d.name(), p.partition()), OffsetSpec.latest());
      }
    }
    Map<TopicPartition, ListOffsetsResult.ListOffsetsResultInfo> ends = admin.listOffsets(latest).all().get();
    for (var e : ends.entrySet()) {
      OffsetAndMetadata c = committed.get(e.getKey());
      if (e.getValue().offset() > (c == null ? 0 : c.offset())) {
        return false;
      }
    }
    return true;
  }

  private static ObjectNode report(Run run) {
    double dropped = 0;
    for (Map.Entry<MetricName, ? extends Metric> e : run.streams.metrics().entrySet()) {
      MetricName name = e.getKey();
      if (name.name().equals("dropped-records-total") && name.group().equals("stream-task-metrics")) {
        dropped += ((Number) e.getValue().metricValue()).doubleValue();
      }
    }
    return JSON.createObjectNode().put("run", run.appId).put("dropped", (long) dropped).put("description", run.description);
  }
}
