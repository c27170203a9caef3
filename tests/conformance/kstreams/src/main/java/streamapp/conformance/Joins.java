package streamapp.conformance;

import static java.time.Duration.ofMillis;
import static streamapp.conformance.GraphBuilder.serde;

import java.util.Set;
import java.util.function.BiFunction;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.streams.kstream.GlobalKTable;
import org.apache.kafka.streams.kstream.JoinWindows;
import org.apache.kafka.streams.kstream.Joined;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.KeyValueMapper;
import org.apache.kafka.streams.kstream.StreamJoined;
import org.apache.kafka.streams.kstream.ValueJoiner;
import org.apache.kafka.streams.kstream.ValueJoinerWithKey;

import streamapp.conformance.GraphBuilder.Built;
import streamapp.conformance.Vocabulary.Entry;
import streamapp.conformance.Vocabulary.Role;

/**
 * The graph's join, leftJoin and outerJoin nodes in Kafka Streams, by {@code joinKind}:
 * stream-table, stream-stream (JoinWindows), table-table, table-table-fk (foreign key, KIP-213)
 * and stream-globalTable. {@code parents[0]} is the left side, {@code parents[1]} the right.
 *
 * <p>The joiner's columns are key, left and right. Stream joins take Kafka Streams'
 * ValueJoinerWithKey; table joins have only a ValueJoiner (no key) in 4.3.1, so a joiner that
 * reads the key joins the two values into a {@link Sides} pair and a mapValues with the key
 * computes the result (the same records: a table join calls no joiner for a deletion, and
 * mapValues passes a deletion on). Foreign-key joins use Kafka's default partitioner.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
final class Joins {
  static final Set<String> FIELDS = Set.of("joiner", "joinKind", "windows", "key", "foreignKey");

  /** A table join's two values, for a joiner that also reads the key. */
  private record Sides(Object left, Object right) {}

  private final GraphBuilder b;

  Joins(GraphBuilder b) {
    this.b = b;
  }

  Built join(GraphNode n, Built left, Built right) {
    String kind = n.text("joinKind");
    if (kind == null) {
      throw n.refuse("joinKind", "missing");
    }
    only(n, "windows", kind.equals("stream-stream"));
    only(n, "key", kind.equals("stream-globalTable"));
    only(n, "foreignKey", kind.equals("table-table-fk"));
    if (n.op().equals("outerJoin") && !kind.equals("stream-stream") && !kind.equals("table-table")) {
      throw n.refuse("op", "Kafka Streams has no " + kind + " outer join");
    }
    Entry joiner = b.logic(n, "joiner", Role.JOINER, left, right);
    return switch (kind) {
      case "stream-table" -> streamTable(n, left, right, joiner);
      case "stream-stream" -> streamStream(n, left, right, joiner);
      case "table-table" -> tableTable(n, left, right, joiner);
      case "table-table-fk" -> foreignKey(n, left, right, joiner);
      case "stream-globalTable" -> streamGlobalTable(n, left, right, joiner);
      default -> throw n.refuse("joinKind", "a join of " + kind + " has no Kafka Streams form");
    };
  }

  /** A field a join kind takes (required) or does not (must be unset). */
  private static void only(GraphNode n, String field, boolean takes) {
    if ((n.field(field) != null) != takes) {
      throw n.refuse(field, takes ? "missing" : "not taken by a " + n.text("joinKind") + " join");
    }
  }

  private static ValueJoinerWithKey withKey(Entry joiner) {
    return (k, l, r) -> joiner.twin().apply(k, l, r);
  }

  private static Built result(Object ks, Built left, Entry joiner) {
    return GraphBuilder.plain(ks, left.key(), joiner.result());
  }

  private static void sameKeys(GraphNode n, Built left, Built right) {
    if (left.key() != right.key() || left.windowObjects() || right.windowObjects()) {
      throw n.refuse("parents", "the two sides' keys differ in type (or are windows)");
    }
  }

  private Built streamTable(GraphNode n, Built left, Built right, Entry joiner) {
    sameKeys(n, left, right);
    KStream s = GraphBuilder.stream(n, left);
    KTable t = GraphBuilder.table(n, right);
    Joined how = Joined.with(serde(left.key()), serde(left.value()), serde(right.value()));
    ValueJoinerWithKey j = withKey(joiner);
    return result(n.op().equals("join") ? s.join(t, j, how) : s.leftJoin(t, j, how), left, joiner);
  }

  /** Windows {before, after, grace} in ms: a left record at t joins right records in [t - before, t + after]. */
  private Built streamStream(GraphNode n, Built left, Built right, Entry joiner) {
    sameKeys(n, left, right);
    KStream s = GraphBuilder.stream(n, left), other = GraphBuilder.stream(n, right);
    JsonNode w = n.field("windows");
    var before = ofMillis(n.number("windows", w, "before"));
    var after = ofMillis(n.number("windows", w, "after"));
    var grace = ofMillis(n.number("windows", w, "grace"));
    JoinWindows windows = JoinWindows.ofTimeDifferenceAndGrace(before, grace).before(before).after(after);
    StreamJoined how = StreamJoined.with(serde(left.key()), serde(left.value()), serde(right.value()));
    ValueJoinerWithKey j = withKey(joiner);
    KStream out = switch (n.op()) {
      case "join" -> s.join(other, j, windows, how);
      case "leftJoin" -> s.leftJoin(other, j, windows, how);
      default -> s.outerJoin(other, j, windows, how);
    };
    return result(out, left, joiner);
  }

  private Built tableTable(GraphNode n, Built left, Built right, Entry joiner) {
    sameKeys(n, left, right);
    KTable t = GraphBuilder.table(n, left), other = GraphBuilder.table(n, right);
    ValueJoiner j = joiner.readsKey() ? Sides::new : (l, r) -> joiner.twin().apply(null, l, r);
    KTable out = switch (n.op()) {
      case "join" -> t.join(other, j);
      case "leftJoin" -> t.leftJoin(other, j);
      default -> t.outerJoin(other, j);
    };
    return result(withKeyAfter(out, joiner), left, joiner);
  }

  /** The right table's key from the left row's key and value (Kafka Streams' BiFunction extractor). */
  private Built foreignKey(GraphNode n, Built left, Built right, Entry joiner) {
    Entry fk = b.logic(n, "foreignKey", Role.FOREIGN_KEY, left);
    if (fk.result() != right.key() || left.windowObjects() || right.windowObjects()) {
      throw n.refuse("foreignKey", fk.text() + " gives a " + fk.returns() + ", the right table's keys are " + right.key().spark);
    }
    KTable t = withSerdes(n, 0, left), other = withSerdes(n, 1, right);
    BiFunction extract = (k, v) -> fk.twin().apply(k, v, null);
    ValueJoiner j = joiner.readsKey() ? Sides::new : (l, r) -> joiner.twin().apply(null, l, r);
    KTable out = n.op().equals("join") ? t.join(other, extract, j) : t.leftJoin(other, extract, j);
    return result(withKeyAfter(out, joiner), left, joiner);
  }

  /**
   * A foreign-key join serialises both tables' values with the tables' own serdes (the left
   * value's hash, the right value in responses); a table whose serde Kafka Streams lost (a
   * mapValues or join result) is given it again by an identity mapValues with a Materialized.
   */
  private KTable withSerdes(GraphNode n, int side, Built in) {
    KTable t = GraphBuilder.table(n, in);
    return b.valueSerdeKnown(n.parents().get(side)) ? t : t.mapValues((k, v) -> v, GraphBuilder.stored(in.key(), in.value()));
  }

  /** A table join's result for a joiner that reads the key: computed from the {@link Sides}. */
  private static KTable withKeyAfter(KTable joined, Entry joiner) {
    if (!joiner.readsKey()) {
      return joined;
    }
    return joined.mapValues((k, sides) -> joiner.twin().apply(k, ((Sides) sides).left(), ((Sides) sides).right()));
  }

  /** The table key looked up is {@code key} of the stream record; the joiner's key is the stream's. */
  private Built streamGlobalTable(GraphNode n, Built left, Built right, Entry joiner) {
    if (!(right.ks() instanceof GlobalKTable global)) {
      throw n.refuse("parents", "a stream-globalTable join needs a global table on the right");
    }
    Entry key = b.logic(n, "key", Role.KEY, left);
    if (key.result() != right.key()) {
      throw n.refuse("key", key.text() + " gives a " + key.returns() + ", the global table's keys are " + right.key().spark);
    }
    KStream s = GraphBuilder.stream(n, left);
    KeyValueMapper lookup = (k, v) -> key.twin().apply(k, v, null);
    ValueJoinerWithKey j = withKey(joiner);
    return result(n.op().equals("join") ? s.join(global, lookup, j) : s.leftJoin(global, lookup, j), left, joiner);
  }
}
