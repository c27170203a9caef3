package io.streamapp.spark;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

import io.streamapp.spark.KeyedWindows.Key;
import io.streamapp.spark.KeyedWindows.Span;

import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.util.LongAccumulator;

import scala.jdk.javaapi.CollectionConverters;

/**
 * Kafka Streams' session window aggregation with a declarative aggregator (count, sum, min, max,
 * avg, latest), with its state per key.
 *
 * <p>The records of a task are one group of a {@code transformWithState}, as in {@link
 * TimeWindowAggregation}. A map state holds each record key's sessions (start, end, aggregate) in
 * RocksDB, so a micro-batch reads and writes only the keys its records have. The semantics are
 * {@code runtime/spark/stateful/windows.py}'s: a record merges every session of its key within the
 * inactivity gap that its store still returns (Kafka Streams' session store retains gap + grace:
 * a fetch skips sessions ending before {@code stream time before the record - gap - grace + 1}),
 * the merged sessions' aggregates are merged (Kafka Streams' session merger) and the record
 * added; a merged session whose end is before {@code stream time - grace - gap} drops the record
 * ({@code late}). Emit updates: per batch and changed session its last value, and a tombstone for
 * every session merged into one of other bounds, in the order of last change. Emit final: one row
 * per session when the stream time passes {@code end + grace + gap}, in the order Kafka Streams
 * closes them (end, start, key); a closed session is past the retention, so no record merges it.
 * Suppress: when the stream time reaches {@code end + grace + gap}, in the order of the buffer
 * (end, key, start); a record at that stream time may still make a session of the same bounds,
 * which is emitted again.
 *
 * <p>Closing and forgetting sessions without reading the whole task: the keys are listed by the
 * bucket of their sessions' ends ({@link KeyListing}); a batch reads only the buckets
 * whose sessions it may close or forget.
 */
public final class SessionWindowAggregation {
  private SessionWindowAggregation() {}

  /**
   * The aggregation of {@code rows} by task ({@link KeyedWindows#byTask}), with a session's start
   * and end (its first and last record's timestamps) as the window.
   */
  public static Dataset<Row> apply(
      Dataset<Row> rows,
      long gap,
      long grace,
      String emit,
      String function,
      String valueType,
      String outputSchema,
      LongAccumulator late) {
    if ("collect_list".equals(function)) {
      throw new IllegalArgumentException(
          "collect_list sessions run on the Python engine: a merge must order the values by timestamp");
    }
    WindowAggregator aggregator =
        WindowAggregator.of(function, DataType.fromJson(valueType));
    Spec spec =
        new Spec(
            gap, grace, KeyedWindows.emitsFinal(emit), "suppress".equals(emit), aggregator, rows.schema());
    return KeyedWindows.byTask(rows, new Processor(spec, late), outputSchema);
  }

  static final class Spec implements java.io.Serializable {
    final long gap;
    final long grace;
    final boolean emitFinal;
    /** Final results that close together in suppression's order: by end, key, start (emit
     * final's store: end, start, key). */
    final boolean keyBeforeStart;
    final WindowAggregator aggregator;
    final KeyedWindows.Columns columns;
    final StructType sessions;
    /** The longest time, in ms, from a session's end to its forgetting. */
    final long span;

    Spec(
        long gap,
        long grace,
        boolean emitFinal,
        boolean keyBeforeStart,
        WindowAggregator aggregator,
        StructType input) {
      this.gap = gap;
      this.grace = grace;
      this.emitFinal = emitFinal;
      this.keyBeforeStart = keyBeforeStart;
      this.aggregator = aggregator;
      this.columns = new KeyedWindows.Columns(input);
      this.sessions = KeyedWindows.windows("sessions", List.of("start", "end"), aggregator);
      // Listed by its end in buckets of this width (a session is kept while it may merge or close:
      // its end within grace + gap of the stream time).
      this.span = grace + 2 * gap + 1;
    }

    /** The earliest end of a session a record may merge at stream time {@code now} (before it). */
    long horizon(long now) {
      return now == Long.MIN_VALUE ? Long.MIN_VALUE : now - grace - gap + 1;
    }

    /**
     * The stream time that closes a session ending at {@code end}: emit final once {@code end <
     * stream time - grace - gap}; suppression's buffer once its end + grace + gap is reached
     * (KAFKA-8289).
     */
    long closesAt(long end) {
      return end + grace + gap + (keyBeforeStart ? 0 : 1);
    }
  }

  /** A session of a key: bounds and aggregate (its last slot: the max timestamp, the end). */
  static final class Session {
    final long start;
    final long end;
    final Object[] slot;

    Session(long start, long end, Object[] slot) {
      this.start = start;
      this.end = end;
      this.slot = slot;
    }
  }

  /** A batch's view of the keys' sessions (ordered by start). */
  static final class Sessions extends KeyedWindows.Keys<List<Session>> {
    Sessions(MapState<Row, Row> state, int records) {
      super(state, records);
    }

    @Override
    List<Session> load(Row stored) {
      List<Session> out = new ArrayList<>();
      if (stored != null) {
        for (Row s : stored.<Row>getList(0)) {
          out.add(new Session(s.getLong(0), s.getLong(1), KeyedWindows.slot(s, 2)));
        }
      }
      return out;
    }

    @Override
    List<Object> rows(List<Session> sessions) {
      List<Object> rows = new ArrayList<>(sessions.size());
      for (Session s : sessions) {
        rows.add(KeyedWindows.window(s.slot, s.start, s.end));
      }
      return rows;
    }
  }

  static final class Processor extends KeyedWindows.ListedProcessor {
    private final Spec spec;

    Processor(Spec spec, LongAccumulator late) {
      super(late, spec.columns.keyRow, "sessions", spec.sessions, "ends", spec.span);
      this.spec = spec;
    }

    @Override
    public scala.collection.Iterator<Row> handleInputRows(
        Integer group, scala.collection.Iterator<Row> input, TimerValues timerValues) {
      KeyedWindows.Columns c = spec.columns;
      List<Row> records =
          Batches.arrivalOrder(CollectionConverters.asJava(input), c.sub, c.offset, c.ts);
      Long streamTime = field(begin(), 0);
      // Sessions closing at a stream time up to this one were emitted by an earlier batch.
      long before = streamTime == null ? Long.MIN_VALUE : streamTime;
      WindowAggregator agg = spec.aggregator;
      Sessions batch = new Sessions(state, records.size());
      // Changed sessions in the order of their last change (null: the tombstone of a merged one).
      LinkedHashMap<Span, Object[]> changed =
          new LinkedHashMap<>(Batches.capacity(records.size()), 0.75f, true);
      List<Row> out = new ArrayList<>();
      List<Row> finals = new ArrayList<>();
      // Suppress: sessions closed before this batch that a new session of the same bounds replaced.
      Set<Span> reemit = new HashSet<>();
      long lateCount = 0;
      for (Row r : records) {
        long ts = r.getLong(c.ts);
        long previous = streamTime == null ? Long.MIN_VALUE : streamTime;
        streamTime = streamTime == null ? ts : Math.max(streamTime, ts);
        Key k = new Key(r.get(c.key));
        List<Session> list = batch.of(k);
        long start = ts;
        long end = ts;
        long horizon = spec.horizon(previous);
        List<Session> merging = new ArrayList<>(2);
        for (Session s : list) {
          if (s.end >= ts - spec.gap && s.start <= ts + spec.gap && s.end >= horizon) {
            merging.add(s);
            start = Math.min(start, s.start);
            end = Math.max(end, s.end);
          }
        }
        if (end < streamTime - spec.grace - spec.gap) {
          out.add(KeyedWindows.row("late", k.key, start, end, null, ts, r.get(c.partition), r.get(c.offset)));
          lateCount++;
          continue;
        }
        Object[] slot = agg.initial(ts);
        boolean listed = false;
        for (Session s : merging) {
          list.remove(s);
          agg.merge(slot, s.slot);
          listed |= listing.bucket(s.end) == listing.bucket(end);
          if (!spec.emitFinal && (s.start != start || s.end != end)) {
            changed.put(new Span(k, s.start, s.end), null);
          }
        }
        agg.add(slot, r.get(c.value), ts);
        slot[slot.length - 1] = end;
        // A session of these bounds that the fetch no longer returns (it ends at the horizon) is
        // overwritten, as Kafka Streams' store.put overwrites the session key: not kept twice.
        // Suppression's buffer emitted it already (it closed at this stream time), and emits the
        // new one too: the old one's row now if the batch's close would have given it.
        for (Iterator<Session> it = list.iterator(); it.hasNext(); ) {
          Session s = it.next();
          if (s.start == start && s.end == end) {
            it.remove();
            listed = true;
            if (spec.emitFinal && spec.closesAt(end) <= streamTime) {
              Span span = new Span(k, start, end);
              if (reemit.remove(span) || spec.closesAt(end) > before) {
                finals.add(result(k, s, agg));
              }
              if (spec.closesAt(end) <= before) {
                reemit.add(span);
              }
            }
          }
        }
        int at = 0;
        while (at < list.size() && list.get(at).start < start) {
          at++;
        }
        list.add(at, new Session(start, end, slot));
        batch.changed(k);
        if (spec.emitFinal && spec.closesAt(end) <= before) {
          // Closed on arrival (suppression: it ends grace + gap behind a stream time this batch has
          // not moved), which the close below, of what closes after `before`, would miss.
          reemit.add(new Span(k, start, end));
        }
        if (!spec.emitFinal) {
          changed.put(new Span(k, start, end), slot);
        }
        if (!listed) {
          listing.list(k, end);
        }
      }
      countLate(lateCount);
      for (Map.Entry<Span, Object[]> e : changed.entrySet()) {
        Span s = e.getKey();
        Object[] slot = e.getValue();
        Object value = slot == null ? null : agg.result(slot);
        out.add(KeyedWindows.row("update", s.key().key, s.start(), s.end(), value, s.end(), null, null));
      }
      if (streamTime != null) {
        if (spec.emitFinal) {
          for (Span span : reemit) {
            for (Session s : batch.of(span.key())) {
              if (s.start == span.start() && s.end == span.end()) {
                finals.add(result(span.key(), s, agg));
              }
            }
          }
          finals.addAll(close(batch, before, streamTime, agg));
          finals.sort(KeyedWindows.finalOrder(spec.keyBeforeStart));
          out.addAll(finals);
        }
        forget(batch, streamTime);
      }
      batch.write();
      end(streamTime);
      return CollectionConverters.asScala(out.iterator());
    }

    private Row result(Key k, Session s, WindowAggregator agg) {
      return KeyedWindows.row("final", k.key, s.start, s.end, agg.result(s.slot), s.end, null, null);
    }

    /** Sessions the stream time closed since {@code before} ({@link Spec#closesAt}). */
    private List<Row> close(Sessions batch, long before, long now, WindowAggregator agg) {
      // Ends e with before < closesAt(e) <= now.
      long shift = spec.closesAt(0);
      long low = before == Long.MIN_VALUE ? Long.MIN_VALUE : before - shift + 1;
      long high = now - shift;
      List<Row> out = new ArrayList<>();
      if (high < low) {
        return out;
      }
      Set<Key> seen = new HashSet<>();
      for (long bucket : listing.overlapping(low, high)) {
        for (Key k : listing.keys(bucket)) {
          if (!seen.add(k)) {
            continue;
          }
          for (Session s : batch.of(k)) {
            if (s.end >= low && s.end <= high) {
              out.add(result(k, s, agg));
            }
          }
        }
      }
      return out;
    }

    /**
     * Forget the sessions no record can merge any more (end before the horizon): the buckets
     * wholly before it are read (and leave the listing), and their keys' old sessions dropped.
     */
    private void forget(Sessions batch, long now) {
      // Before the next record's horizon, and closed: one ending at now - grace - gap closes later.
      long horizon = now - spec.grace - spec.gap;
      for (long bucket : listing.before(horizon)) {
        for (Key k : listing.keys(bucket)) {
          for (Iterator<Session> it = batch.of(k).iterator(); it.hasNext(); ) {
            if (it.next().end < horizon) {
              it.remove();
              batch.changed(k);
            }
          }
        }
      }
    }
  }
}
