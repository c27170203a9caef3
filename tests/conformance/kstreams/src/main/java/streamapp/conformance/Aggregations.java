package streamapp.conformance;

import static java.time.Duration.ofMillis;
import static streamapp.conformance.GraphBuilder.serde;
import static streamapp.conformance.GraphBuilder.stored;

import java.util.HashMap;
import java.util.List;
import java.util.Map;

import com.fasterxml.jackson.databind.JsonNode;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.kstream.Aggregator;
import org.apache.kafka.streams.kstream.CogroupedKStream;
import org.apache.kafka.streams.kstream.EmitStrategy;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Initializer;
import org.apache.kafka.streams.kstream.KGroupedStream;
import org.apache.kafka.streams.kstream.KGroupedTable;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.KTable;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Merger;
import org.apache.kafka.streams.kstream.Reducer;
import org.apache.kafka.streams.kstream.SessionWindowedKStream;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.SlidingWindows;
import org.apache.kafka.streams.kstream.TimeWindowedCogroupedKStream;
import org.apache.kafka.streams.kstream.TimeWindowedKStream;
import org.apache.kafka.streams.kstream.TimeWindows;
import org.apache.kafka.streams.kstream.Windows;

import streamapp.conformance.GraphBuilder.Built;
import streamapp.conformance.Vocabulary.Entry;
import streamapp.conformance.Vocabulary.Role;
import streamapp.conformance.Vocabulary.Type;

/**
 * The graph's groupBy, count, aggregate, reduce and cogroup nodes in Kafka Streams: grouping,
 * windows, emit strategy and the folds, with serdes from the tracked types (counts are longs).
 *
 * <p>Windowed aggregations of a groupByKey drop null keys first ({@code filter(k != null)}): Kafka
 * Streams skips them anyway, but counts them in dropped-records-total, which the suite compares
 * with StreamApp's count of late records. A key-changing groupBy needs no filter: Kafka Streams'
 * repartition step drops null new keys without counting them (and a filter on the old key would
 * drop records the selector keys). Non-windowed aggregations are left as they are.
 */
@SuppressWarnings({"rawtypes", "unchecked"})
final class Aggregations {
  /**
   * A groupBy node. Kafka Streams' grouping is made when an aggregation asks for it, since
   * whether null keys are dropped first depends on the aggregation (windowed or not); at most
   * once each way.
   */
  static final class Grouping {
    private final Built input;
    private final Entry selector;
    private final Type key;
    private final Map<Boolean, Object> made = new HashMap<>();

    Grouping(Built input, Entry selector, Type key) {
      this.input = input;
      this.selector = selector;
      this.key = key;
    }

    boolean table() {
      return input.ks() instanceof KTable;
    }

    /** A KGroupedStream or KGroupedTable, for a windowed aggregation or not. */
    Object grouped(boolean windowed) {
      return made.computeIfAbsent(windowed && !table(), this::group);
    }

    private Object group(boolean dropNullKeys) {
      Grouped how = Grouped.with(serde(key), serde(input.value()));
      if (input.ks() instanceof KTable t) {
        return t.groupBy((k, v) -> KeyValue.pair(selector == null ? k : selector.twin().apply(k, v, null), v), how);
      }
      KStream s = (KStream) input.ks();
      if (selector != null) {
        return s.groupBy((k, v) -> selector.twin().apply(k, v, null), how);
      }
      return (dropNullKeys ? s.filter((k, v) -> k != null) : s).groupByKey(how);
    }
  }

  /** A declarative or functional aggregate: how to start, add, subtract (tables), merge (sessions). */
  private record Fold(Initializer init, Aggregator add, Aggregator subtract, Merger merge, Type type) {}

  private final GraphBuilder b;

  Aggregations(GraphBuilder b) {
    this.b = b;
  }

  /** groupBy: selector null = groupByKey; a table's groupBy keeps the value, re-keyed. */
  Built groupBy(GraphNode n, Built in) {
    if (in.windowObjects() || !(in.ks() instanceof KStream || in.ks() instanceof KTable)) {
      throw n.refuse("parents", "groupBy needs a stream or a table with plain keys, its parent gives a " + in.kind());
    }
    Entry selector = n.field("selector") == null ? null : b.logic(n, "selector", Role.KEY, in);
    Type key = selector == null ? in.key() : selector.result();
    return new Built(new Grouping(in, selector, key), key, in.value(), false, false);
  }

  /** count, aggregate, reduce (one grouped parent) and cogroup (several). */
  Built aggregate(GraphNode n, List<Built> in) {
    if (n.op().equals("cogroup")) {
      return cogroup(n, in);
    }
    Grouping g = grouping(n, in.get(0));
    Object target = target(n, g);
    Object out;
    Type type;
    switch (n.op()) {
      case "count" -> {
        type = Type.LONG;
        out = count(target, stored(g.key, type));
      }
      case "aggregate" -> {
        Fold f = n.field("fn") != null ? sum(n, in.get(0)) : functions(n, in.get(0));
        type = f.type();
        out = fold(n, g, target, f);
      }
      default -> {
        type = in.get(0).value();
        out = reduce(n, g, target, in.get(0));
      }
    }
    boolean windowed = n.field("windows") != null;
    return new Built(out, g.key, type, windowed, windowed);
  }

  private static Grouping grouping(GraphNode n, Built in) {
    if (!(in.ks() instanceof Grouping g)) {
      throw n.refuse("parents", n.op() + " needs a grouped stream or table, its parent gives a " + in.kind());
    }
    return g;
  }

  // -- windows --------------------------------------------------------------------------------------

  /** What the fold runs on: the grouping, or its windows (with the emit strategy). */
  private Object target(GraphNode n, Grouping g) {
    boolean onClose = emitsFinal(n);
    JsonNode w = n.field("windows");
    if (w == null) {
      if (onClose) {
        throw n.refuse("emit", "emit final needs windows");
      }
      return g.grouped(false);
    }
    if (g.table()) {
      throw n.refuse("windows", "a grouped table has no windows");
    }
    Object windowed = windowedBy(g.grouped(true), windows(n, w));
    if (!onClose) {
      return windowed;
    }
    return windowed instanceof TimeWindowedKStream t
        ? t.emitStrategy(EmitStrategy.onWindowClose())
        : ((SessionWindowedKStream) windowed).emitStrategy(EmitStrategy.onWindowClose());
  }

  private static boolean emitsFinal(GraphNode n) {
    String emit = n.text("emit");
    if (emit != null && !emit.equals("updates") && !emit.equals("final")) {
      throw n.refuse("emit", "emit " + emit + " is neither updates nor final");
    }
    return "final".equals(emit);
  }

  /** {kind, size, advance, grace} in ms: TimeWindows, SlidingWindows (size: the time
   * difference) or SessionWindows (size: the inactivity gap). */
  private static Object windows(GraphNode n, JsonNode w) {
    var size = ofMillis(n.number("windows", w, "size"));
    var grace = ofMillis(n.number("windows", w, "grace"));
    String kind = w.path("kind").asText();
    return switch (kind) {
      case "tumbling" -> TimeWindows.ofSizeAndGrace(size, grace);
      case "hopping" -> TimeWindows.ofSizeAndGrace(size, grace).advanceBy(ofMillis(n.number("windows", w, "advance")));
      case "sliding" -> SlidingWindows.ofTimeDifferenceAndGrace(size, grace);
      case "session" -> SessionWindows.ofInactivityGapAndGrace(size, grace);
      default -> throw n.refuse("windows.kind", "window kind " + kind + " is none of tumbling, hopping, sliding, session");
    };
  }

  /** {@code windowedBy} of a KGroupedStream or CogroupedKStream (they share no interface). */
  private static Object windowedBy(Object grouped, Object spec) {
    if (grouped instanceof CogroupedKStream c) {
      return spec instanceof SlidingWindows s ? c.windowedBy(s)
          : spec instanceof SessionWindows s ? c.windowedBy(s) : c.windowedBy((Windows) spec);
    }
    KGroupedStream g = (KGroupedStream) grouped;
    return spec instanceof SlidingWindows s ? g.windowedBy(s)
        : spec instanceof SessionWindows s ? g.windowedBy(s) : g.windowedBy((Windows) spec);
  }

  // -- the folds ------------------------------------------------------------------------------------

  private static Object count(Object target, Materialized m) {
    if (target instanceof KGroupedStream s) {
      return s.count(m);
    }
    if (target instanceof KGroupedTable t) {
      return t.count(m);
    }
    return target instanceof TimeWindowedKStream w ? w.count(m) : ((SessionWindowedKStream) target).count(m);
  }

  /** The declarative aggregate: only {@code sum} (of a bigint expression; 0 to start, NULL adds nothing). */
  private Fold sum(GraphNode n, Built in) {
    String fn = n.text("fn");
    if (!fn.equals("sum")) {
      throw n.refuse("fn", "fn " + fn + " has no Kafka Streams twin in the oracle");
    }
    for (String f : List.of("initializer", "adder", "subtractor")) {
      if (n.field(f) != null) {
        throw n.refuse(f, "a declarative aggregate (fn) takes no " + f);
      }
    }
    String sql = n.text("expr") == null ? "value" : n.text("expr");
    Entry e = b.expression(n, "expr", sql, Role.VALUE, in);
    if (e.result() != Type.LONG) {
      throw n.refuse("expr", "sum of a " + e.returns() + " has no twin (a sum of bigints has)");
    }
    Aggregator add = (k, v, agg) -> {
      Long x = (Long) e.twin().apply(k, v, null);
      return x == null ? agg : Math.addExact((Long) agg, x);
    };
    Aggregator subtract = (k, v, agg) -> {
      Long x = (Long) e.twin().apply(k, v, null);
      return x == null ? agg : Math.subtractExact((Long) agg, x);
    };
    Merger merge = (k, x, y) -> Math.addExact((Long) x, (Long) y);
    return new Fold(() -> 0L, add, subtract, merge, Type.LONG);
  }

  /** aggregate(initializer, adder[, subtractor]) with Python functions, whose aggregate is {@code returns}. */
  private Fold functions(GraphNode n, Built in) {
    Type type = returns(n);
    Entry init = typed(n, "initializer", b.logic(n, "initializer", Role.INITIALIZER), type);
    Entry add = typed(n, "adder", b.logic(n, "adder", Role.ADDER, in), type);
    Entry sub = n.field("subtractor") == null ? null : typed(n, "subtractor", b.logic(n, "subtractor", Role.SUBTRACTOR, in), type);
    Aggregator subtract = sub == null ? null : (k, v, agg) -> sub.twin().apply(k, v, agg);
    return new Fold(() -> init.twin().apply(null, null, null), (k, v, agg) -> add.twin().apply(k, v, agg), subtract, null, type);
  }

  private static Type returns(GraphNode n) {
    Type type = Type.of(n.text("returns"));
    if (type == null) {
      throw n.refuse("returns", "the aggregate's type must be bigint or string, not " + n.text("returns"));
    }
    return type;
  }

  private static Entry typed(GraphNode n, String field, Entry e, Type type) {
    if (e.result() != type) {
      throw n.refuse(field, e.text() + " returns " + e.returns() + ", the aggregate is " + type.spark);
    }
    return e;
  }

  private Object fold(GraphNode n, Grouping g, Object target, Fold f) {
    if (g.table() ? f.subtract() == null : n.field("subtractor") != null) {
      throw n.refuse("subtractor", g.table()
          ? "a grouped table's aggregate needs a subtractor (KGroupedTable.aggregate)"
          : "only a grouped table's aggregate subtracts");
    }
    Materialized m = stored(g.key, f.type());
    if (target instanceof KGroupedStream s) {
      return s.aggregate(f.init(), f.add(), m);
    }
    if (target instanceof KGroupedTable t) {
      return t.aggregate(f.init(), f.add(), f.subtract(), m);
    }
    if (target instanceof TimeWindowedKStream w) {
      return w.aggregate(f.init(), f.add(), m);
    }
    if (f.merge() == null) {
      throw n.refuse("windows", "Kafka Streams' session aggregate needs a session merger, which functions do not give");
    }
    return ((SessionWindowedKStream) target).aggregate(f.init(), f.add(), f.merge(), m);
  }

  /** reduce(reducer[, subtractor]): Python {@code f(aggregate, value)}, the twin {@code (-, value, aggregate)}. */
  private Object reduce(GraphNode n, Grouping g, Object target, Built in) {
    Type returns = n.text("returns") == null ? in.value() : returns(n);
    if (returns != in.value()) {
      throw n.refuse("returns", "a reduce keeps the value type " + in.value().spark + ", not " + returns.spark);
    }
    Entry r = typed(n, "reducer", b.logic(n, "reducer", Role.REDUCER, in), returns);
    Entry s = n.field("subtractor") == null ? null : typed(n, "subtractor", b.logic(n, "subtractor", Role.REDUCER, in), returns);
    if (g.table() != (s != null)) {
      throw n.refuse("subtractor", g.table() ? "a grouped table's reduce needs a subtractor" : "only a grouped table's reduce subtracts");
    }
    Reducer reducer = (agg, v) -> r.twin().apply(null, v, agg);
    Materialized m = stored(g.key, returns);
    if (target instanceof KGroupedStream gs) {
      return gs.reduce(reducer, m);
    }
    if (target instanceof KGroupedTable t) {
      return t.reduce(reducer, (agg, v) -> s.twin().apply(null, v, agg), m);
    }
    return target instanceof TimeWindowedKStream w ? w.reduce(reducer, m) : ((SessionWindowedKStream) target).reduce(reducer, m);
  }

  /**
   * cogroup: {@code first.cogroup(adders[0]).cogroup(second, adders[1])...(.windowedBy(w))
   * .aggregate(initializer)}. Kafka Streams 4.3.1 has no emitStrategy for cogrouped windows, and
   * its session cogroup needs a merger: both are refused.
   */
  private Built cogroup(GraphNode n, List<Built> in) {
    Type type = returns(n);
    JsonNode adders = n.field("adders");
    if (adders == null || adders.size() != in.size()) {
      throw n.refuse("adders", "one adder per parent (" + in.size() + "), the graph gives " + adders);
    }
    JsonNode w = n.field("windows");
    if (emitsFinal(n)) {
      throw n.refuse("emit", "Kafka Streams 4.3.1 has no emitStrategy for cogrouped windows (TimeWindowedCogroupedKStream)");
    }
    Object spec = w == null ? null : windows(n, w);
    if (spec instanceof SessionWindows) {
      throw n.refuse("windows", "Kafka Streams' session cogroup needs a session merger, which functions do not give");
    }
    Entry init = typed(n, "initializer", b.logic(n, "initializer", Role.INITIALIZER), type);
    CogroupedKStream c = null;
    Type key = null;
    for (int i = 0; i < in.size(); i++) {
      Grouping g = grouping(n, in.get(i));
      if (g.table() || (key != null && g.key != key)) {
        throw n.refuse("parents", "cogroup needs grouped streams with one key type");
      }
      key = g.key;
      Entry add = typed(n, "adders[" + i + "]", b.logic(n, "adders[" + i + "]", adders.get(i), Role.ADDER, in.get(i)), type);
      Aggregator a = (k, v, agg) -> add.twin().apply(k, v, agg);
      KGroupedStream grouped = (KGroupedStream) g.grouped(w != null);
      c = c == null ? grouped.cogroup(a) : c.cogroup(grouped, a);
    }
    Initializer start = () -> init.twin().apply(null, null, null);
    Object out = spec == null
        ? c.aggregate(start, stored(key, type))
        : ((TimeWindowedCogroupedKStream) windowedBy(c, spec)).aggregate(start, stored(key, type));
    return new Built(out, key, type, w != null, w != null);
  }
}
