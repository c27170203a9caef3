package io.streamapp.spark;

import java.io.IOException;
import java.io.OutputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.connector.write.SupportsTruncate;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.internal.connector.SupportsStreamingUpdateAsAppend;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Every Spark API this library uses that is not one of Spark's public ones, in one place: a Spark
 * upgrade that moves or changes one of them touches this file (and {@code SparkInternalsTest})
 * only. The list, with the Spark version tested, is in the module's README.md.
 *
 * <p>The other classes use Spark's public APIs (Dataset, the DataSource V2 writer interfaces,
 * {@code transformWithState}, Row, types, UDFs) and the catalyst row classes that the public
 * DataSource V2 writer API hands a sink ({@code DataWriter<InternalRow>}).
 */
public final class SparkInternals {
  private SparkInternals() {}

  /**
   * The local property Spark's stream thread sets to the micro-batch it runs
   * ({@code MicroBatchExecution.BATCH_ID_KEY}).
   */
  static final String BATCH_ID_KEY = "streaming.sql.batchId";

  /**
   * The rows of {@code rows} as Spark's internal rows, planned as the Dataset is ({@code
   * queryExecution().toRdd()}, where Spark's own Kafka sink writes from): no conversion to a
   * {@link Row} per record.
   */
  static RDD<InternalRow> internalRows(Dataset<Row> rows) {
    return rows.queryExecution().toRdd();
  }

  /** The micro-batch the calling thread (Spark's stream thread) runs; -1 outside one. */
  static long currentBatchId() {
    String batch = SparkSession.active().sparkContext().getLocalProperty(BATCH_ID_KEY);
    return batch == null ? -1 : Long.parseLong(batch);
  }

  /** Whether {@code bytes} are valid UTF-8 as Spark's strings judge it. */
  static boolean validUtf8(byte[] bytes) {
    return UTF8String.fromBytes(bytes).isValid();
  }

  /**
   * A streaming write whose update mode writes each batch's rows as append does ({@code
   * SupportsStreamingUpdateAsAppend}, as Spark's own Kafka sink's), truncation a no-op.
   */
  interface UpdateAsAppendWriteBuilder extends SupportsTruncate, SupportsStreamingUpdateAsAppend {}

  /**
   * Spark's streaming checkpoint file manager ({@code CheckpointFileManager}, the class {@code
   * spark.sql.streaming.checkpointFileManagerClass} names), of which a subclass serves local paths
   * itself: a path on any other file system goes to Spark's own manager for it, unchanged. The
   * subclass gets Hadoop's raw local file system ({@link #local}) and implements the writing,
   * folders, existence and deletion; this class keeps Spark's contract around them (an atomic
   * file's cancel, the renamed-file check, exceptions thrown unchecked as the Scala trait does).
   */
  public abstract static class CheckpointFiles implements CheckpointFileManager {
    private static final String CONF_KEY = "spark.sql.streaming.checkpointFileManagerClass";

    private final Path root;
    /** Files of a local path (opened and listed through Hadoop's raw local FS: no process). */
    protected final RawLocalFileSystem local;
    /** Spark's own manager, for a path on another file system. */
    private final CheckpointFileManager other;

    protected CheckpointFiles(Path path, Configuration conf) {
      this.root = path;
      FileSystem fs = call(() -> path.getFileSystem(conf));
      if (fs instanceof LocalFileSystem) {
        fs = ((LocalFileSystem) fs).getRawFileSystem();
      }
      if (fs instanceof RawLocalFileSystem) {
        this.local = (RawLocalFileSystem) fs;
        this.other = null;
      } else {
        Configuration without = new Configuration(conf);
        without.unset(CONF_KEY);
        this.local = null;
        this.other = CheckpointFileManager.create(path, without);
      }
    }

    /**
     * A file being written to a temporary file: {@link #publish}ed when its stream is closed, its
     * temporary file removed ({@link #removeTemporary}) after that and after a cancel.
     */
    protected interface AtomicWrite {
      OutputStream stream();

      /** Called once the stream is closed; throws Hadoop's FileAlreadyExistsException if it must. */
      void publish() throws IOException;

      /** The temporary file goes, if it is still there. */
      void removeTemporary() throws IOException;

      /** Where the file is published (checked to exist after publishing when Spark asks to). */
      java.nio.file.Path target();
    }

    /** Begins writing {@code path} on the local disk ({@code overwrite}: it may replace a file). */
    protected abstract AtomicWrite beginAtomic(Path path, boolean overwrite) throws IOException;

    protected abstract void mkdirsLocal(Path path) throws IOException;

    protected abstract boolean existsLocal(Path path);

    protected abstract void deleteLocal(Path path) throws IOException;

    @Override
    public final CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
      if (other != null) {
        return other.createAtomic(path, overwriteIfPossible);
      }
      return new Cancellable(call(() -> beginAtomic(path, overwriteIfPossible)));
    }

    @Override
    public final FSDataInputStream open(Path path) {
      return other != null ? other.open(path) : call(() -> local.open(path));
    }

    @Override
    public final FileStatus[] list(Path path, PathFilter filter) {
      return other != null ? other.list(path, filter) : call(() -> local.listStatus(path, filter));
    }

    @Override
    public final void mkdirs(Path path) {
      if (other != null) {
        other.mkdirs(path);
      } else {
        call(
            () -> {
              mkdirsLocal(path);
              return null;
            });
      }
    }

    @Override
    public final boolean exists(Path path) {
      return other != null ? other.exists(path) : existsLocal(path);
    }

    @Override
    public final void delete(Path path) {
      if (other != null) {
        other.delete(path);
      } else {
        call(
            () -> {
              deleteLocal(path);
              return null;
            });
      }
    }

    @Override
    public final boolean isLocal() {
      return other == null || other.isLocal();
    }

    @Override
    public final Path createCheckpointDirectory() {
      if (other != null) {
        return other.createCheckpointDirectory();
      }
      Path qualified = local.makeQualified(root);
      mkdirs(qualified);
      return qualified;
    }

    @Override
    public final void close() {
      if (other != null) {
        other.close();
      }
    }

    /** Spark's atomic output stream around an {@link AtomicWrite}. */
    private static final class Cancellable extends CancellableFSDataOutputStream {
      private final AtomicWrite write;
      private boolean done;

      Cancellable(AtomicWrite write) {
        super(write.stream());
        this.write = write;
      }

      @Override
      public synchronized void close() throws IOException {
        if (done) {
          return;
        }
        done = true;
        try {
          super.close();
          write.publish();
        } finally {
          write.removeTemporary();
        }
        if (SQLConf.get().checkpointRenamedFileCheck() && !java.nio.file.Files.exists(write.target())) {
          throw new IllegalStateException(
              "Renamed temp file to " + write.target() + ". But " + write.target() + " does not exist.");
        }
      }

      @Override
      public synchronized void cancel() {
        if (done) {
          return;
        }
        done = true;
        try {
          super.close();
        } catch (IOException ignored) {
          // the temporary file goes anyway
        }
        try {
          write.removeTemporary();
        } catch (IOException ignored) {
          // a hidden temporary file left behind is never read
        }
      }
    }
  }

  /** An I/O call whose checked exception is rethrown unchecked ({@link #call}). */
  interface IoCall<T> {
    T call() throws IOException;
  }

  /**
   * Runs {@code body}, rethrowing its IOException unchanged: the Scala interfaces declare none, and
   * Spark's callers catch Hadoop's (FileNotFoundException, FileAlreadyExistsException) by type.
   */
  static <T> T call(IoCall<T> body) {
    try {
      return body.call();
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  @SuppressWarnings("unchecked")
  static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}
