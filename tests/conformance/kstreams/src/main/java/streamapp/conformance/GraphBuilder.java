package streamapp.conformance;

import static java.util.Map.entry;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.kstream.Branched;
import org.apache.kafka.streams.kstream.BranchedKStream;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.Repartitioned;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.kstream.Windowed;

import streamapp.conformance.Vocabulary.Entry;
import streamapp.conformance.Vocabulary.Role;
import streamapp.conformance.Vocabulary.Type;

/**
 * Builds the Kafka Streams topology of StreamApp's logical graph (the JSON of
 * runtime/topology/export.py), so that every conformance scenario is written once, as a StreamApp
 * topology, and Kafka Streams runs the same one.
 *
 * <p>Nodes come in build order; each becomes a {@link Built}: the Kafka Streams object it made and
 * the types of its keys and values, from which every serde is chosen (sources and sinks name
 * theirs; counts are longs; logic results have the vocabulary's types). User logic comes from
 * {@link Vocabulary}. This class builds sources, stateless steps, routing (split, merge,
 * repartition, sinks) and table conversions; {@link Aggregations} and {@link Joins} the rest.
 * Anything without a faithful twin is {@link Refused}, naming the node and the field.
 *
 * <p>The graph's types are only known at run time, so the builders use raw Kafka Streams types;
 * the serdes chosen from the tracked types keep the records honest (a wrong one fails the run).
 */
@SuppressWarnings({"rawtypes", "unchecked"})
final class GraphBuilder {
  /** The built topology and the topics its tasks consume (a global table's are not among them). */
  record Result(Topology topology, List<String> inputs) {}

  /**
   * What a node built: {@code ks} is a KStream, KTable, GlobalKTable, {@link Aggregations.Grouping}
   * or {@link Branches}; {@code windowed} is the graph's flag (keys are, or came from, windows),
   * set from the node once it is built;
   * {@code windowObjects}: the keys are Kafka Streams {@link Windowed} objects (a windowed table).
   */
  record Built(Object ks, Type key, Type value, boolean windowed, boolean windowObjects) {
    String kind() {
      if (ks instanceof Aggregations.Grouping g) {
        return g.table() ? "grouped table" : "grouped stream";
      }
      return ks instanceof KTable || ks instanceof GlobalKTable ? "table" : "stream";
    }
  }

  /** A split's branches by name (each branch node takes its own). */
  record Branches(Map<String, KStream> streams) {}

  /** Every operation's own fields (besides op, name, parents, kind, windowed): anything else set
   * on a node is refused. */
  private static final Set<String> SOURCE_FIELDS = Set.of(
      "topics", "keySerde", "valueSerde", "table", "timestamp", "maxOffsetsPerTrigger",
      "deserializationErrors", "deadLetterTopic");
  private static final Set<String> WINDOWING = Set.of("windows", "emit");
  private static final Map<String, Set<String>> FIELDS = Map.ofEntries(
      entry("source", SOURCE_FIELDS), entry("globalTable", SOURCE_FIELDS),
      entry("filter", Set.of("predicate")), entry("filterNot", Set.of("predicate")),
      entry("map", Set.of("key", "value")), entry("mapValues", Set.of("mapper")),
      entry("selectKey", Set.of("mapper")), entry("flatMapValues", Set.of("mapper")),
      entry("flatMap", Set.of("mapper")), entry("peek", Set.of("action")), entry("print", Set.of("label")),
      entry("split", Set.of("branches", "default")), entry("branch", Set.of("branch")), entry("merge", Set.of()),
      entry("repartition", Set.of("partitions", "repartitionName")),
      entry("to", Set.of("topic", "keySerde", "valueSerde", "partitioner")),
      entry("groupBy", Set.of("selector")), entry("count", WINDOWING),
      entry("aggregate", Set.of("fn", "expr", "initializer", "adder", "subtractor", "returns", "windows", "emit")),
      entry("reduce", Set.of("reducer", "subtractor", "returns", "windows", "emit")),
      entry("cogroup", Set.of("adders", "initializer", "returns", "windows", "emit")),
      entry("suppress", Set.of()), entry("toStream", Set.of()), entry("toTable", Set.of()),
      entry("join", Joins.FIELDS), entry("leftJoin", Joins.FIELDS), entry("outerJoin", Joins.FIELDS),
      entry("process", Set.of("processor")));

  private final StreamsBuilder builder = new StreamsBuilder();
  private final Map<String, Built> built = new HashMap<>();
  private final Map<String, GraphNode> nodes = new HashMap<>();
  private final List<String> inputs = new ArrayList<>();
  private final Aggregations aggregations = new Aggregations(this);
  private final Joins joins = new Joins(this);

  private GraphBuilder() {}

  /** The topology of {@code graph} ({"applicationId", "nodes": [...]}); {@link Refused} if it has no twin. */
  static Result build(JsonNode graph) {
    GraphBuilder b = new GraphBuilder();
    for (JsonNode json : graph.path("nodes")) {
      GraphNode n = new GraphNode(json);
      Built out = b.build(n);
      out = new Built(out.ks(), out.key(), out.value(), n.windowed(), out.windowObjects());
      if (!out.kind().equals(n.kind())) {
        throw n.refuse("kind", "the graph says " + n.kind() + ", the oracle built a " + out.kind());
      }
      b.built.put(n.name(), out);
      b.nodes.put(n.name(), n);
    }
    return new Result(b.builder.build(), List.copyOf(new LinkedHashSet<>(b.inputs)));
  }

  private Built build(GraphNode n) {
    if (!FIELDS.containsKey(n.op())) {
      throw n.refuse("op", "an operation the oracle does not know: " + n.op());
    }
    n.onlyFields(FIELDS.get(n.op()));
    List<Built> in = parents(n);
    return switch (n.op()) {
      case "source", "globalTable" -> source(n);
      case "filter", "filterNot" -> filter(n, in.get(0));
      case "map" -> map(n, in.get(0));
      case "mapValues" -> mapValues(n, in.get(0));
      case "selectKey" -> selectKey(n, in.get(0));
      case "flatMapValues", "flatMap" -> flatMap(n, in.get(0));
      case "peek", "print" -> peek(n, in.get(0));
      case "split" -> split(n, in.get(0));
      case "branch" -> branch(n, in.get(0));
      case "merge" -> merge(n, in);
      case "repartition" -> repartition(n, in.get(0));
      case "to" -> sink(n, in.get(0));
      case "toTable", "toStream", "suppress" -> convert(n, in.get(0));
      case "groupBy" -> aggregations.groupBy(n, in.get(0));
      case "count", "aggregate", "reduce", "cogroup" -> aggregations.aggregate(n, in);
      case "join", "leftJoin", "outerJoin" -> joins.join(n, in.get(0), in.get(1));
      case "process" -> throw n.refuse("op", "process nodes run Python processors; the oracle has no twin");
      default -> throw new IllegalStateException("FIELDS lists " + n.op() + ", build() does not");
    };
  }

  /** The parents' built forms, after checking how many the operation takes. */
  private List<Built> parents(GraphNode n) {
    List<Built> out = new ArrayList<>();
    for (String p : n.parents()) {
      Built b = built.get(p);
      if (b == null) {
        throw n.refuse("parents", "parent " + p + " is not built before it (not in build order)");
      }
      out.add(b);
    }
    int want = switch (n.op()) {
      case "source", "globalTable" -> 0;
      case "join", "leftJoin", "outerJoin" -> 2;
      case "merge", "cogroup" -> Math.max(1, out.size());
      default -> 1;
    };
    if (out.size() != want) {
      throw n.refuse("parents", n.op() + " takes " + want + " parent(s), the graph gives " + out.size());
    }
    return out;
  }

  // -- shared by the builders ---------------------------------------------------------------------

  static Serde serde(Type t) {
    return t == Type.LONG ? Serdes.Long() : Serdes.String();
  }

  static Materialized stored(Type key, Type value) {
    return Materialized.with(serde(key), serde(value));
  }

  static KStream stream(GraphNode n, Built b) {
    if (!(b.ks() instanceof KStream s)) {
      throw n.refuse("parents", n.op() + " needs a stream, its parent gives a " + b.kind());
    }
    return s;
  }

  static KTable table(GraphNode n, Built b) {
    if (!(b.ks() instanceof KTable t)) {
      throw n.refuse("parents", n.op() + " needs a table, its parent gives a " + b.kind());
    }
    return t;
  }

  static Built plain(Object ks, Type key, Type value) {
    return new Built(ks, key, value, false, false);
  }

  /**
   * Whether Kafka Streams knows the value serde of the table node {@code name} outputs: a table
   * mapValues or join result has none (KTableImpl passes none on without a Materialized), a
   * filter keeps its parent's; sources, toTable and aggregations are given theirs.
   */
  boolean valueSerdeKnown(String name) {
    GraphNode n = nodes.get(name);
    return switch (n.op()) {
      case "filter", "filterNot" -> valueSerdeKnown(n.parents().get(0));
      case "mapValues", "join", "leftJoin", "outerJoin" -> false;
      default -> true;
    };
  }

  /** The logic of {@code field} as a vocabulary entry, checked against the records it reads. */
  Entry logic(GraphNode n, String field, Role role, Built... reads) {
    return logic(n, field, n.field(field), role, reads);
  }

  /**
   * The vocabulary entry for {@code logic} ({"expr": sql} or {"function": ref, "returns": type}),
   * used as {@code role} over the records {@code reads} (a joiner reads two): refused when it is
   * not in the vocabulary, has another role, reads values of another type, or reads keys that are
   * not plain text (windowed keys are structs in StreamApp; the vocabulary's keys are strings).
   */
  Entry logic(GraphNode n, String field, JsonNode logic, Role role, Built... reads) {
    if (logic == null) {
      throw n.refuse(field, "missing");
    }
    boolean function = logic.has("function");
    String text = logic.path(function ? "function" : "expr").asText(null);
    if (text == null) {
      throw n.refuse(field, "neither an expr nor a function: " + logic);
    }
    Entry e = Vocabulary.find(text);
    if (e == null || e.function() != function) {
      throw n.refuse(field, "not in the oracle's vocabulary: " + text);
    }
    if (e.role() != role) {
      throw n.refuse(field, text + " is a " + e.role().json + " in the vocabulary, used here as a " + role.json);
    }
    Type returns = Type.of(logic.path("returns").asText(null));
    if (logic.hasNonNull("returns") && returns != e.result()) {
      throw n.refuse(field, text + " returns " + e.returns() + " in the vocabulary, the graph says " + logic.get("returns"));
    }
    for (Built b : reads) {
      if (e.in() != null && e.in() != b.value()) {
        throw n.refuse(field, text + " reads " + e.in().spark + " values, these are " + b.value().spark);
      }
      if (e.readsKey() && (b.windowed() || b.key() != Type.STRING)) {
        throw n.refuse(field, text + " reads the key, and these keys are " + (b.windowed() ? "windowed" : b.key().spark));
      }
    }
    return e;
  }

  /** An expression given as bare text (a declarative aggregate's {@code expr}). */
  Entry expression(GraphNode n, String field, String sql, Role role, Built reads) {
    return logic(n, field, JsonNodeFactory.instance.objectNode().put("expr", sql), role, reads);
  }

  /** A key or value serde's type; only string and long have twins. */
  static Type serdeType(GraphNode n, String field) {
    JsonNode v = n.field(field);
    Type t = v != null && v.isTextual() ? Type.of(v.asText()) : null;
    if (t == null) {
      throw n.refuse(field, "the oracle reads and writes string and long only, not " + v);
    }
    return t;
  }

  // -- sources ------------------------------------------------------------------------------------

  private Built source(GraphNode n) {
    Type key = serdeType(n, "keySerde"), value = serdeType(n, "valueSerde");
    if (n.field("timestamp") != null) {
      throw n.refuse("timestamp", "event time from an expression has no twin (Kafka Streams reads the record's timestamp)");
    }
    String errors = n.text("deserializationErrors");
    if (errors != null && !errors.equals("fail")) {
      throw n.refuse("deserializationErrors", errors + " has no twin (Kafka Streams' default handler fails)");
    }
    List<String> topics = new ArrayList<>();
    n.field("topics").forEach(t -> topics.add(t.asText()));
    Consumed consumed = Consumed.with(serde(key), serde(value));
    boolean global = n.op().equals("globalTable");
    if ((global || n.flag("table")) && topics.size() != 1) {
      throw n.refuse("topics", "a table reads one topic, not " + topics);
    }
    if (!global) {
      // A global table's topic is read by the global thread, outside the consumer group.
      inputs.addAll(topics);
    }
    if (global) {
      return plain(builder.globalTable(topics.get(0), consumed), key, value);
    }
    if (n.flag("table")) {
      return plain(builder.table(topics.get(0), consumed), key, value);
    }
    return plain(builder.stream(topics, consumed), key, value);
  }

  // -- stateless steps ------------------------------------------------------------------------------

  /** filter keeps a record whose predicate is TRUE, filterNot one whose predicate is FALSE: both
   * drop a NULL (SQL), which Kafka Streams' filterNot of the same predicate would keep. */
  private Built filter(GraphNode n, Built in) {
    Entry p = logic(n, "predicate", Role.PREDICATE, in);
    Object keep = n.op().equals("filter") ? Boolean.TRUE : Boolean.FALSE;
    if (in.ks() instanceof KTable t) {
      return with(in, n.op().equals("filter")
          ? t.filter((k, v) -> keep.equals(p.twin().apply(k, v, null)))
          : t.filterNot((k, v) -> !keep.equals(p.twin().apply(k, v, null))));
    }
    KStream s = stream(n, in);
    return with(in, n.op().equals("filter")
        ? s.filter((k, v) -> keep.equals(p.twin().apply(k, v, null)))
        : s.filterNot((k, v) -> !keep.equals(p.twin().apply(k, v, null))));
  }

  private Built map(GraphNode n, Built in) {
    Entry key = logic(n, "key", Role.KEY, in), value = logic(n, "value", Role.VALUE, in);
    KStream out = stream(n, in).map((k, v) -> KeyValue.pair(key.twin().apply(k, v, null), value.twin().apply(k, v, null)));
    return plain(out, key.result(), value.result());
  }

  private Built mapValues(GraphNode n, Built in) {
    Entry m = logic(n, "mapper", Role.VALUE, in);
    Object out = in.ks() instanceof KTable t
        ? t.mapValues((k, v) -> m.twin().apply(k, v, null))
        : stream(n, in).mapValues((k, v) -> m.twin().apply(k, v, null));
    return new Built(out, in.key(), m.result(), in.windowed(), in.windowObjects());
  }

  private Built selectKey(GraphNode n, Built in) {
    Entry m = logic(n, "mapper", Role.KEY, in);
    return plain(stream(n, in).selectKey((k, v) -> m.twin().apply(k, v, null)), m.result(), in.value());
  }

  /** flatMapValues: the mapper's list of values; flatMap: its list of (key, value) pairs. A NULL
   * array gives no records (Spark's explode). */
  private Built flatMap(GraphNode n, Built in) {
    boolean pairs = n.op().equals("flatMap");
    Entry m = logic(n, "mapper", pairs ? Role.PAIRS : Role.VALUES, in);
    KStream s = stream(n, in);
    if (pairs) {
      return plain(s.flatMap((k, v) -> orEmpty(m.twin().apply(k, v, null))), Type.STRING, m.result());
    }
    return plain(s.flatMapValues((k, v) -> orEmpty(m.twin().apply(k, v, null))), in.key(), m.result());
  }

  private static List orEmpty(Object list) {
    return list == null ? List.of() : (List) list;
  }

  /** peek's action and print's output are not twinned: both pass the records on unchanged. */
  private Built peek(GraphNode n, Built in) {
    KStream s = stream(n, in);
    return n.op().equals("peek") ? with(in, s.peek((k, v) -> {})) : in;
  }

  /** The same types as {@code in}, another Kafka Streams object. */
  private static Built with(Built in, Object ks) {
    return new Built(ks, in.key(), in.value(), in.windowed(), in.windowObjects());
  }

  // -- routing --------------------------------------------------------------------------------------

  /** A record takes the first branch whose predicate is TRUE, else the default branch (if any). */
  private Built split(GraphNode n, Built in) {
    Map<String, KStream> streams = new HashMap<>();
    BranchedKStream split = stream(n, in).split();
    int i = 0;
    for (JsonNode branch : n.field("branches")) {
      String name = branch.path("name").asText(), field = "branches[" + i++ + "].predicate";
      Entry p = logic(n, field, branch.get("predicate"), Role.PREDICATE, in);
      split = split.branch((k, v) -> Boolean.TRUE.equals(p.twin().apply(k, v, null)), Branched.withConsumer(s -> streams.put(name, (KStream) s)));
    }
    String otherwise = n.text("default");
    if (otherwise != null) {
      split.defaultBranch(Branched.withConsumer(s -> streams.put(otherwise, (KStream) s)));
    } else {
      split.noDefaultBranch();
    }
    return with(in, new Branches(streams));
  }

  private Built branch(GraphNode n, Built in) {
    String name = n.text("branch");
    if (!(in.ks() instanceof Branches branches) || !branches.streams().containsKey(name)) {
      throw n.refuse("branch", "its parent has no branch " + name);
    }
    return with(in, branches.streams().get(name));
  }

  private Built merge(GraphNode n, List<Built> in) {
    KStream out = stream(n, in.get(0));
    for (Built other : in.subList(1, in.size())) {
      if (other.key() != in.get(0).key() || other.value() != in.get(0).value()) {
        throw n.refuse("parents", "merged streams have other key or value types");
      }
      out = out.merge(stream(n, other));
    }
    return with(in.get(0), out);
  }

  private Built repartition(GraphNode n, Built in) {
    Repartitioned how = Repartitioned.with(serde(in.key()), serde(in.value()));
    if (n.field("partitions") != null) {
      how = how.withNumberOfPartitions(n.field("partitions").asInt());
    }
    if (n.text("repartitionName") != null) {
      how = how.withName(n.text("repartitionName"));
    }
    return with(in, stream(n, in).repartition(how));
  }

  /** to: the sink's serdes must be the records' types (a mismatch is a wrong graph or a missing twin). */
  private Built sink(GraphNode n, Built in) {
    if (n.field("partitioner") != null) {
      throw n.refuse("partitioner", "a partitioner expression has no twin");
    }
    Type key = serdeType(n, "keySerde"), value = serdeType(n, "valueSerde");
    if (key != in.key() || value != in.value()) {
      throw n.refuse("keySerde", "writes " + key.spark + "/" + value.spark + ", the records are " + in.key().spark + "/" + in.value().spark);
    }
    stream(n, in).to(n.text("topic"), Produced.with(serde(key), serde(value)));
    return in;
  }

  // -- tables and streams ---------------------------------------------------------------------------

  /**
   * toTable; toStream (a windowed table's key becomes the text {@code key@start/end}, epoch ms, as
   * StreamApp writes it; from then on keys are strings); suppress (until a window closes).
   */
  private Built convert(GraphNode n, Built in) {
    switch (n.op()) {
      case "toTable":
        return with(in, stream(n, in).toTable(stored(in.key(), in.value())));
      case "toStream":
        if (!in.windowObjects()) {
          return with(in, table(n, in).toStream());
        }
        KStream out = table(n, in).toStream((w, v) -> windowText((Windowed) w));
        return new Built(out, Type.STRING, in.value(), true, false);
      default:
        if (!in.windowObjects()) {
          throw n.refuse("parents", "suppress needs a windowed table (StreamApp suppresses until a window closes)");
        }
        return with(in, table(n, in).suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded())));
    }
  }

  static String windowText(Windowed w) {
    return w.key() + "@" + w.window().start() + "/" + w.window().end();
  }
}
