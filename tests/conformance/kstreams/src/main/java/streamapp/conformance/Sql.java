package streamapp.conformance;

import java.math.BigInteger;
import java.util.List;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * The value semantics the vocabulary's twins are written in: Spark SQL's (as StreamApp runs it:
 * Spark 4, ANSI mode) for the expressions, Python's for the conformance functions.
 *
 * <p>Why a class of its own: each {@link Vocabulary} entry is one line, so the rules that line
 * relies on live here once — NULL in, NULL out; three-valued logic; {@code %} with the sign of
 * the dividend; errors where ANSI SQL or Python raises one (an exception here, which the twin
 * checker reports as {@code "ERROR: ..."} and a Kafka Streams run as a failure).
 *
 * <p>SQL integers are Java {@code Long}s: {@code cast(x as int)} checks the int range, and the
 * vocabulary's int arithmetic ({@code % n}, {@code + 1}) cannot leave it.
 */
final class Sql {
  private Sql() {}

  // -- casts ------------------------------------------------------------------------------------

  /** {@code cast(x as string)}: a number's decimal text. */
  static String str(Object v) {
    return v == null ? null : v.toString();
  }

  /** {@code cast(x as int)}: a decimal string (Spark trims blanks; ANSI: anything else fails). */
  static Long castInt(Object v) {
    if (v == null) {
      return null;
    }
    return v instanceof Long l ? Math.toIntExact(l) : (long) Integer.parseInt(v.toString().trim());
  }

  /** {@code cast(x as bigint)}. */
  static Long castBigint(Object v) {
    if (v == null) {
      return null;
    }
    return v instanceof Long l ? l : Long.parseLong(v.toString().trim());
  }

  // -- arithmetic and comparison ----------------------------------------------------------------

  /** {@code a % b}: the sign of the dividend, as Java's. */
  static Long mod(Long a, long b) {
    return a == null ? null : a % b;
  }

  /** {@code a + b}; ANSI mode fails on overflow. */
  static Long plus(Long a, long b) {
    return a == null ? null : Math.addExact(a, b);
  }

  static Long times(Long a, long b) {
    return a == null ? null : Math.multiplyExact(a, b);
  }

  static Boolean eq(Object a, Object b) {
    return a == null || b == null ? null : a.equals(b);
  }

  static Boolean ne(Object a, Object b) {
    return a == null || b == null ? null : !a.equals(b);
  }

  static Boolean lt(Long a, long b) {
    return a == null ? null : a < b;
  }

  /** {@code a AND b}, three-valued; {@code b} is not evaluated when {@code a} is false (Spark). */
  static Boolean and(Boolean a, Supplier<Boolean> b) {
    if (Boolean.FALSE.equals(a)) {
      return false;
    }
    Boolean right = b.get();
    if (Boolean.FALSE.equals(right)) {
      return false;
    }
    return a == null || right == null ? null : true;
  }

  /** {@code v IN (options)}: NULL for a NULL {@code v}. */
  static Boolean in(Object v, Object... options) {
    return v == null ? null : List.of(options).contains(v);
  }

  // -- strings and arrays -----------------------------------------------------------------------

  /** {@code concat(...)}: NULL when any part is NULL. */
  static String concat(Object... parts) {
    StringBuilder out = new StringBuilder();
    for (Object p : parts) {
      if (p == null) {
        return null;
      }
      out.append(p);
    }
    return out.toString();
  }

  /** {@code lower(x)}: StreamApp maps case as the JVM's String does (scenario caseMapping). */
  static String lower(Object v) {
    return v == null ? null : v.toString().toLowerCase();
  }

  static String upper(Object v) {
    return v == null ? null : v.toString().toUpperCase();
  }

  static Object coalesce(Object v, Object otherwise) {
    return v == null ? otherwise : v;
  }

  static Object nullif(Object a, Object b) {
    return a != null && a.equals(b) ? null : a;
  }

  /** {@code split(v, regex)[index]}: Spark keeps trailing empty strings; ANSI fails out of range. */
  static String splitAt(Object v, String regex, int index) {
    return v == null ? null : v.toString().split(regex, -1)[index];
  }

  /** {@code element_at(array, i)}: 1-based, negative from the end, 0 an error (ANSI: out of range too). */
  static Object elementAt(List<?> array, Long i) {
    if (i == null) {
      return null;
    }
    if (i == 0) {
      throw new ArrayIndexOutOfBoundsException("SQL array indices start at 1");
    }
    return array.get((int) (i > 0 ? i - 1 : array.size() + i));
  }

  // -- Python (the conformance functions) -------------------------------------------------------

  private static final Pattern PY_INT = Pattern.compile("(?U)[+-]?\\d+(_\\d+)*");

  /** Python's {@code int(v)} of a str: blanks stripped, a sign, digits (any script) with single
   * underscores between them; arbitrary precision. {@code int(None)} is a TypeError. */
  static BigInteger pyInt(Object v) {
    if (v == null) {
      throw new IllegalArgumentException("int() argument must be a string or a number, not 'NoneType'");
    }
    if (v instanceof Long l) {
      return BigInteger.valueOf(l);
    }
    String s = pyStrip(v.toString());
    if (!PY_INT.matcher(s).matches()) {
      throw new NumberFormatException("invalid literal for int() with base 10: '" + v + "'");
    }
    return new BigInteger(s.replace("_", ""));
  }

  /** A Python int handed back to Spark as a bigint: out of range fails. */
  static Long bigint(BigInteger v) {
    return v.longValueExact();
  }

  /** Python's {@code str.strip()}: Unicode white space, which Java's trim() is not. */
  private static String pyStrip(String s) {
    int start = 0, end = s.length();
    while (start < end && pySpace(s.charAt(start))) {
      start++;
    }
    while (end > start && pySpace(s.charAt(end - 1))) {
      end--;
    }
    return s.substring(start, end);
  }

  private static boolean pySpace(char c) {
    return Character.isWhitespace(c) || Character.isSpaceChar(c) || c == '\u0085';
  }

  /** Python's {@code s.split(sep)} (a literal separator, every piece kept). */
  static String[] pySplit(String s, String sep) {
    return s.split(Pattern.quote(sep), -1);
  }
}
