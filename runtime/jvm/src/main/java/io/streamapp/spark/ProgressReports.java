package io.streamapp.spark;

import org.apache.spark.sql.streaming.StreamingQuery;
import org.apache.spark.sql.streaming.StreamingQueryProgress;

/**
 * The app's monitor reads a query's new progress reports here in a py4j call or a few: the
 * reports made since the last one it read, each with what the at-least-once sink wrote in that
 * batch. Read from Python one by one, a report cost about ten py4j round trips (the buffer's
 * length and element, the report's timestamp, batch id and JSON, the sink's counts), made twice a
 * second in bursts of a dozen reports: CPU a 2-core driver's micro-batches waited for.
 *
 * <p>One answer carries at most {@link #BUDGET} characters of reports (and at least one report):
 * py4j writes a longer answer to its socket in 8 KiB pieces, and the second piece waits for the
 * first one's acknowledgement, which the receiver delays by 40 ms (measured: 12 reports of 8,350
 * characters took 44 ms, 8 reports of 5,564 took 0.4 ms).
 */
public final class ProgressReports {
  /** The characters of reports one answer carries, below py4j's 8 KiB socket writes. */
  static final int BUDGET = 6000;

  private ProgressReports() {}

  /**
   * The reports of {@code query} made after the one with {@code timestamp} (Spark's ISO-8601 UTC
   * text, which sorts as time does) and {@code batchId}, oldest first, as far as {@link #BUDGET}
   * allows: a JSON object {@code {"more": true|false, "reports": [[report, written], ...]}}, where
   * {@code report} is the report's own JSON, {@code written} the records its batch wrote per topic
   * ({@link KafkaSink#written}) when {@code sink} names the query's sink registration and the
   * batch ran, else null, and {@code more} tells that newer reports were left for the next call.
   */
  public static String after(StreamingQuery query, String timestamp, long batchId, String sink) {
    StreamingQueryProgress[] buffer = query.recentProgress();
    int first = buffer.length;
    while (first > 0) {
      StreamingQueryProgress report = buffer[first - 1];
      int order = report.timestamp().compareTo(timestamp);
      if (order < 0 || (order == 0 && report.batchId() <= batchId)) {
        break;
      }
      first--;
    }
    StringBuilder out = new StringBuilder("{\"reports\":[");
    int i = first;
    for (; i < buffer.length; i++) {
      StreamingQueryProgress report = buffer[i];
      String json = report.json();
      if (i > first && out.length() + json.length() > BUDGET) {
        break;
      }
      String written = null;
      if (sink != null && report.durationMs().containsKey("addBatch")) {
        written = KafkaSink.written(sink, report.batchId());
      }
      out.append(i > first ? ",[" : "[").append(json).append(',');
      out.append(written == null ? "null" : written).append(']');
    }
    return out.append("],\"more\":").append(i < buffer.length).append('}').toString();
  }
}
