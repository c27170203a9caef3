package streamapp.conformance;

import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Set;

import com.fasterxml.jackson.databind.JsonNode;

/**
 * One node of StreamApp's logical graph as runtime/topology/export.py writes it: {@code op},
 * {@code name}, {@code parents}, {@code kind}, {@code windowed} and the operation's own fields in
 * camelCase. Why a class: every read of a field can fail, and each failure must name the node and
 * the field ({@link #refuse}).
 */
final class GraphNode {
  private static final Set<String> COMMON = Set.of("op", "name", "parents", "kind", "windowed");

  private final JsonNode json;

  GraphNode(JsonNode json) {
    this.json = json;
  }

  String op() {
    return json.path("op").asText();
  }

  String name() {
    return json.path("name").asText();
  }

  /** What the graph says the node outputs: stream, table, grouped stream or grouped table. */
  String kind() {
    return json.path("kind").asText();
  }

  /** Whether the graph says the node's keys are windows (or derived from windowed keys). */
  boolean windowed() {
    return json.path("windowed").asBoolean(false);
  }

  List<String> parents() {
    List<String> out = new ArrayList<>();
    json.path("parents").forEach(p -> out.add(p.asText()));
    return out;
  }

  /** The field, or null when it is missing or JSON null. */
  JsonNode field(String field) {
    JsonNode v = json.get(field);
    return v == null || v.isNull() ? null : v;
  }

  /** A text field (null when missing); anything else is refused. */
  String text(String field) {
    JsonNode v = field(field);
    if (v != null && !v.isTextual()) {
      throw refuse(field, "expected text, got " + v);
    }
    return v == null ? null : v.asText();
  }

  boolean flag(String field) {
    JsonNode v = field(field);
    return v != null && v.asBoolean();
  }

  /** {@code holder.field} (holder: this node's field {@code where}), a whole number of milliseconds. */
  long number(String where, JsonNode holder, String field) {
    JsonNode v = holder.get(field);
    if (v == null || !v.canConvertToLong()) {
      throw refuse(where + "." + field, "expected a whole number, got " + v);
    }
    return v.longValue();
  }

  /** Refuses a field the oracle does not know for this operation, unless it is null or false:
   * a new field may change the semantics, and guessing would make a wrong oracle. */
  void onlyFields(Set<String> known) {
    for (Iterator<String> it = json.fieldNames(); it.hasNext(); ) {
      String f = it.next();
      JsonNode v = json.get(f);
      boolean unset = v.isNull() || (v.isBoolean() && !v.asBoolean());
      if (!COMMON.contains(f) && !known.contains(f) && !unset) {
        throw refuse(f, "a field the oracle does not know for " + op() + " (value " + v + ")");
      }
    }
  }

  Refused refuse(String field, String why) {
    return new Refused("node " + name() + " (" + op() + "), field " + field + ": " + why);
  }
}
