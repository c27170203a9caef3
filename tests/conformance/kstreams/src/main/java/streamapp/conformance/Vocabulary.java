package streamapp.conformance;

import static streamapp.conformance.Vocabulary.Role.ADDER;
import static streamapp.conformance.Vocabulary.Role.FOREIGN_KEY;
import static streamapp.conformance.Vocabulary.Role.INITIALIZER;
import static streamapp.conformance.Vocabulary.Role.JOINER;
import static streamapp.conformance.Vocabulary.Role.KEY;
import static streamapp.conformance.Vocabulary.Role.PAIRS;
import static streamapp.conformance.Vocabulary.Role.PREDICATE;
import static streamapp.conformance.Vocabulary.Role.REDUCER;
import static streamapp.conformance.Vocabulary.Role.SUBTRACTOR;
import static streamapp.conformance.Vocabulary.Role.VALUE;
import static streamapp.conformance.Vocabulary.Role.VALUES;
import static streamapp.conformance.Vocabulary.Type.BOOLEAN;
import static streamapp.conformance.Vocabulary.Type.LONG;
import static streamapp.conformance.Vocabulary.Type.STRING;

import java.io.File;
import java.math.BigInteger;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Pattern;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.JsonNodeFactory;
import com.fasterxml.jackson.databind.node.ObjectNode;
import org.apache.kafka.streams.KeyValue;

/**
 * The user logic the oracle can run: every Spark SQL expression and Python function a conformance
 * topology may use, each with its Java twin, one entry a line.
 *
 * <p>Why it exists: the oracle builds Kafka Streams topologies from StreamApp's logical graph, whose
 * logic is Spark SQL text or a Python function by reference; Java cannot run either, so the logic
 * comes from this fixed table, looked up by its exact text (whitespace runs collapsed). A graph
 * using anything else is refused. Texts are unique across the table.
 *
 * <p>A twin takes {@code (key, value, other)}; its role binds them: over a record (predicate,
 * value, key, values, pairs, foreignKey) {@code (key, value, -)}; a joiner {@code (key, left,
 * right)}; an initializer {@code ()}; an adder or subtractor {@code (key, value, aggregate)} (the
 * Python {@code f(key, value, aggregate)}); a reducer {@code (-, value, aggregate)} (the Python
 * {@code f(aggregate, value)}). {@code in} is the type of the values it reads (null: any); keys
 * are strings. Twins follow SQL's and Python's rules exactly ({@link Sql}).
 *
 * <p>Checking the twins against Spark: {@code Vocabulary list} prints the entries as a JSON array
 * of {@code {"role", "in", "text", "returns"}}; {@code Vocabulary eval ROWS_JSON_FILE} reads rows
 * {@code {"key", "value", "other"}} and prints, per entry text, its result on every row
 * ({@code "ERROR: <message>"} where the twin throws).
 */
public final class Vocabulary {
  /** How a twin's arguments are bound, and what its result is for (see the class doc). */
  public enum Role {
    PREDICATE("predicate"), VALUE("value"), KEY("key"), VALUES("values"), PAIRS("pairs"),
    FOREIGN_KEY("foreignKey"), JOINER("joiner"), INITIALIZER("initializer"), ADDER("adder"),
    SUBTRACTOR("subtractor"), REDUCER("reducer");

    final String json;

    Role(String json) {
      this.json = json;
    }
  }

  /** The types of keys, values and results, by their Spark names ("long" serdes carry bigints). */
  public enum Type {
    STRING("string"), LONG("bigint"), BOOLEAN("boolean");

    final String spark;

    Type(String spark) {
      this.spark = spark;
    }

    /** A serde name ("string", "long") or Spark type name ("string", "bigint") as a type; null if neither. */
    static Type of(String name) {
      return switch (name == null ? "" : name) {
        case "string" -> STRING;
        case "long", "bigint" -> LONG;
        default -> null;
      };
    }
  }

  /** A twin: Java that computes what the entry's SQL or Python computes. */
  @FunctionalInterface
  public interface Twin {
    Object apply(Object key, Object value, Object other);
  }

  /**
   * One entry: {@code result} is a scalar's type, a predicate's BOOLEAN, the element type of
   * {@code values}, the value type of {@code pairs} (whose keys are strings).
   */
  public record Entry(Role role, Type in, String text, Type result, boolean function, Twin twin) {
    /** The Spark type of the result. */
    public String returns() {
      return switch (role) {
        case VALUES -> "array<" + result.spark + ">";
        case PAIRS -> "array<struct<key:string,value:" + result.spark + ">>";
        default -> result.spark;
      };
    }

    /** Whether the twin reads the record's key (a joiner function gets it: assume so). */
    public boolean readsKey() {
      return function ? role == JOINER : KEY_COLUMN.matcher(text).find();
    }
  }

  private static final Pattern KEY_COLUMN = Pattern.compile("\\bkey\\b");
  private static final List<String> A_TO_F = List.of("a", "b", "c", "d", "e", "f");

  private static Entry expr(Role role, Type in, String text, Type result, Twin twin) {
    return new Entry(role, in, text, result, false, twin);
  }

  private static Entry fn(Role role, Type in, String ref, Type result, Twin twin) {
    return new Entry(role, in, ref, result, true, twin);
  }

  // @formatter:off
  static final List<Entry> ENTRIES = List.of(
      // predicates over string values
      expr(PREDICATE, STRING, "value is not null and cast(value as int) % 3 != 0", BOOLEAN, (k, v, o) -> Sql.and(v != null, () -> Sql.ne(Sql.mod(Sql.castInt(v), 3), 0L))),
      expr(PREDICATE, STRING, "key is null", BOOLEAN, (k, v, o) -> k == null),
      expr(PREDICATE, STRING, "key is not null", BOOLEAN, (k, v, o) -> k != null),
      expr(PREDICATE, STRING, "false", BOOLEAN, (k, v, o) -> false),
      expr(PREDICATE, STRING, "cast(value as int) % 2 = 0", BOOLEAN, (k, v, o) -> Sql.eq(Sql.mod(Sql.castInt(v), 2), 0L)),
      expr(PREDICATE, STRING, "cast(value as int) < 5", BOOLEAN, (k, v, o) -> Sql.lt(Sql.castInt(v), 5)),
      expr(PREDICATE, STRING, "key in ('a', 'b')", BOOLEAN, (k, v, o) -> Sql.in(k, "a", "b")),
      expr(PREDICATE, STRING, "value is null", BOOLEAN, (k, v, o) -> v == null),
      expr(PREDICATE, STRING, "value is not null", BOOLEAN, (k, v, o) -> v != null),
      // value mappers
      expr(VALUE, STRING, "concat('v', value)", STRING, (k, v, o) -> Sql.concat("v", v)),
      expr(VALUE, STRING, "concat(lower(value), '|', upper(value))", STRING, (k, v, o) -> Sql.concat(Sql.lower(v), "|", Sql.upper(v))),
      expr(VALUE, STRING, "concat('t', value)", STRING, (k, v, o) -> Sql.concat("t", v)),
      expr(VALUE, STRING, "concat(value, key)", STRING, (k, v, o) -> Sql.concat(v, k)),
      expr(VALUE, STRING, "upper(value)", STRING, (k, v, o) -> Sql.upper(v)),
      expr(VALUE, STRING, "cast(value as bigint)", LONG, (k, v, o) -> Sql.castBigint(v)),
      expr(VALUE, STRING, "cast(value as bigint) * 2", LONG, (k, v, o) -> Sql.times(Sql.castBigint(v), 2)),
      // over long values (after a count)
      expr(PREDICATE, LONG, "value % 2 = 0", BOOLEAN, (k, v, o) -> Sql.eq(Sql.mod((Long) v, 2), 0L)),
      expr(VALUE, LONG, "value + 1", LONG, (k, v, o) -> Sql.plus((Long) v, 1)),
      expr(VALUE, LONG, "cast(value as string)", STRING, (k, v, o) -> Sql.str(v)),
      // keys
      expr(KEY, STRING, "concat('g', cast(cast(value as int) % 3 as string))", STRING, (k, v, o) -> Sql.concat("g", Sql.str(Sql.mod(Sql.castInt(v), 3)))),
      expr(KEY, STRING, "concat('g', cast(cast(value as int) % 5 as string))", STRING, (k, v, o) -> Sql.concat("g", Sql.str(Sql.mod(Sql.castInt(v), 5)))),
      expr(KEY, STRING, "value", STRING, (k, v, o) -> v),
      expr(KEY, STRING, "key", STRING, (k, v, o) -> k),
      expr(KEY, STRING, "split(value, '[|]')[0]", STRING, (k, v, o) -> Sql.splitAt(v, "[|]", 0)),
      expr(KEY, STRING, "upper(key)", STRING, (k, v, o) -> Sql.upper(k)),
      expr(KEY, STRING, "concat(key, '2')", STRING, (k, v, o) -> Sql.concat(k, "2")),
      // flatMapValues, flatMap
      expr(VALUES, STRING, "array(value, concat(value, 'x'))", STRING, (k, v, o) -> Arrays.asList(v, Sql.concat(v, "x"))),
      expr(PAIRS, STRING, "array(struct(key, value), struct(concat(key, '2') as key, value))", STRING, (k, v, o) -> List.of(KeyValue.pair(k, v), KeyValue.pair(Sql.concat(k, "2"), v))),
      // foreign keys (the right table's key from a left row; never called for a null value: a deletion).
      // The CASE entry on a NULL value: SQL and interpreted Spark give NULL; Spark 4.2's generated
      // code gives 'f' (element_at of a literal array at a NULL computed index). The twin keeps SQL's.
      expr(FOREIGN_KEY, STRING, "CASE WHEN value = '9' THEN NULL ELSE element_at(array('a', 'b', 'c', 'd', 'e', 'f'), cast(value AS INT) % 6 + 1) END", STRING, (k, v, o) -> Boolean.TRUE.equals(Sql.eq(v, "9")) ? null : Sql.elementAt(A_TO_F, Sql.plus(Sql.mod(Sql.castInt(v), 6), 1))),
      expr(FOREIGN_KEY, STRING, "nullif(split(value, ':')[0], '')", STRING, (k, v, o) -> Sql.nullif(Sql.splitAt(v, ":", 0), "")),
      // joiners: (key, left, right)
      expr(JOINER, STRING, "concat(left, '@', right)", STRING, (k, l, r) -> Sql.concat(l, "@", r)),
      expr(JOINER, STRING, "concat(left, '@', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(l, "@", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(coalesce(left, '-'), '@', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(Sql.coalesce(l, "-"), "@", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(left, '+', right)", STRING, (k, l, r) -> Sql.concat(l, "+", r)),
      expr(JOINER, STRING, "concat(left, '+', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(l, "+", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(coalesce(left, '-'), '+', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(Sql.coalesce(l, "-"), "+", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(left, '=', right)", STRING, (k, l, r) -> Sql.concat(l, "=", r)),
      expr(JOINER, STRING, "concat(left, '=', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(l, "=", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(coalesce(left, '-'), '=', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(Sql.coalesce(l, "-"), "=", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "concat(key, ':', left, '@', right)", STRING, (k, l, r) -> Sql.concat(k, ":", l, "@", r)),
      expr(JOINER, STRING, "concat(key, ':', left, '@', coalesce(right, '-'))", STRING, (k, l, r) -> Sql.concat(k, ":", l, "@", Sql.coalesce(r, "-"))),
      expr(JOINER, STRING, "right", STRING, (k, l, r) -> r),
      expr(JOINER, STRING, "left", STRING, (k, l, r) -> l),
      // Python functions: tests/conformance/conformance_functions.py, tests/runtime/spark/join_udfs.py
      fn(INITIALIZER, null, "conformance_functions:zero", LONG, (k, v, o) -> 0L),
      fn(ADDER, STRING, "conformance_functions:add", LONG, (k, v, agg) -> v == null ? agg : Sql.bigint(Sql.pyInt(agg).add(Sql.pyInt(v)))),
      fn(SUBTRACTOR, STRING, "conformance_functions:subtract", LONG, (k, v, agg) -> Sql.bigint(Sql.pyInt(agg).subtract(Sql.pyInt(v)))),
      fn(ADDER, STRING, "conformance_functions:add_tenfold", LONG, (k, v, agg) -> v == null ? agg : Sql.bigint(Sql.pyInt(agg).add(Sql.pyInt(v).multiply(BigInteger.TEN)))),
      fn(REDUCER, STRING, "conformance_functions:keep_larger", STRING, (k, v, agg) -> Sql.pyInt(v).compareTo(Sql.pyInt(agg)) > 0 ? v : agg),
      fn(REDUCER, STRING, "conformance_functions:sum_text", STRING, (k, v, agg) -> Sql.pyInt(agg).add(Sql.pyInt(v)).toString()),
      fn(REDUCER, STRING, "conformance_functions:minus_text", STRING, (k, v, agg) -> Sql.pyInt(agg).subtract(Sql.pyInt(v)).toString()),
      fn(JOINER, STRING, "join_udfs:describe_view", STRING, (k, l, r) -> describeView(k, l, r)),
      fn(FOREIGN_KEY, STRING, "join_udfs:customer_of", STRING, (k, v, o) -> customerOf(v)));
  // @formatter:on

  private static final Map<String, Entry> BY_TEXT = new LinkedHashMap<>();

  static {
    for (Entry e : ENTRIES) {
      if (BY_TEXT.put(e.text(), e) != null) {
        throw new IllegalStateException("two vocabulary entries read " + e.text());
      }
    }
  }

  private Vocabulary() {}

  /** join_udfs.describe_view, a pandas function: {@code key:<left's 2nd |-piece>@<right or ->};
   * pandas gives NaN (null) for a null key or left and for a left without a second piece. */
  private static String describeView(Object key, Object left, Object right) {
    if (key == null || left == null) {
      return null;
    }
    String[] pieces = Sql.pySplit(left.toString(), "|");
    return pieces.length < 2 ? null : Sql.concat(key, ":", pieces[1], "@", Sql.coalesce(right, "-"));
  }

  /** join_udfs.customer_of, a pandas function of the value: what precedes the first ':', null
   * when that is empty (or the value is null). */
  private static String customerOf(Object value) {
    if (value == null) {
      return null;
    }
    String first = value.toString().split(":", -1)[0];
    return first.isEmpty() ? null : first;
  }

  /** The entry for a logic text (an expression or a function reference), or null. */
  static Entry find(String text) {
    return BY_TEXT.get(normalise(text));
  }

  static String normalise(String text) {
    return text.trim().replaceAll("\\s+", " ");
  }

  // -- the twin checker ---------------------------------------------------------------------------

  public static void main(String[] args) throws Exception {
    ObjectMapper json = new ObjectMapper();
    if (args.length == 1 && args[0].equals("list")) {
      System.out.println(json.writeValueAsString(list()));
    } else if (args.length == 2 && args[0].equals("eval")) {
      System.out.println(json.writeValueAsString(eval(json.readTree(new File(args[1])))));
    } else {
      System.err.println("usage: Vocabulary list | Vocabulary eval ROWS_JSON_FILE");
      System.exit(2);
    }
  }

  private static ArrayNode list() {
    ArrayNode out = JsonNodeFactory.instance.arrayNode();
    for (Entry e : ENTRIES) {
      ObjectNode o = out.addObject();
      o.put("role", e.role().json);
      o.put("in", e.in() == null ? null : e.in().spark);
      o.put("text", e.text());
      o.put("returns", e.returns());
    }
    return out;
  }

  private static ObjectNode eval(JsonNode rows) {
    ObjectNode out = JsonNodeFactory.instance.objectNode();
    for (Entry e : ENTRIES) {
      ArrayNode results = out.putArray(e.text());
      for (JsonNode row : rows) {
        results.add(evalRow(e, row));
      }
    }
    return out;
  }

  private static JsonNode evalRow(Entry e, JsonNode row) {
    try {
      Object key = as(STRING, row.get("key"));
      Object value = e.in() == null ? null : as(e.in(), row.get("value"));
      return toJson(e.twin().apply(key, value, as(otherType(e), row.get("other"))));
    } catch (RuntimeException ex) {
      String message = ex.getMessage() == null ? ex.getClass().getSimpleName() : ex.getMessage();
      return JsonNodeFactory.instance.textNode("ERROR: " + message);
    }
  }

  /** The type of a twin's third argument: a joiner's right value, an aggregate. */
  private static Type otherType(Entry e) {
    return switch (e.role()) {
      case JOINER, REDUCER -> e.in();
      case ADDER, SUBTRACTOR -> e.result();
      default -> null;
    };
  }

  /** A row's field as a twin gets it: text, a long, or (type null) what the JSON holds. */
  private static Object as(Type type, JsonNode v) {
    if (v == null || v.isNull()) {
      return null;
    }
    if (type == LONG || (type == null && v.isIntegralNumber())) {
      return v.isIntegralNumber() ? v.longValue() : Long.parseLong(v.asText());
    }
    return v.asText();
  }

  private static JsonNode toJson(Object v) {
    JsonNodeFactory f = JsonNodeFactory.instance;
    if (v == null) {
      return f.nullNode();
    }
    if (v instanceof Boolean b) {
      return f.booleanNode(b);
    }
    if (v instanceof Long l) {
      return f.numberNode(l);
    }
    if (v instanceof KeyValue<?, ?> kv) {
      ObjectNode o = f.objectNode();
      o.set("key", toJson(kv.key));
      o.set("value", toJson(kv.value));
      return o;
    }
    if (v instanceof List<?> list) {
      ArrayNode a = f.arrayNode();
      list.forEach(x -> a.add(toJson(x)));
      return a;
    }
    if (v instanceof String s) {
      return f.textNode(s);
    }
    throw new IllegalStateException("a twin returned a " + v.getClass().getSimpleName());
  }
}
