package io.streamapp.spark;

import java.io.BufferedOutputStream;
import java.io.IOException;
import java.io.OutputStream;
import java.nio.file.FileSystemException;
import java.nio.file.FileVisitResult;
import java.nio.file.Files;
import java.nio.file.NoSuchFileException;
import java.nio.file.SimpleFileVisitor;
import java.nio.file.StandardCopyOption;
import java.nio.file.StandardOpenOption;
import java.nio.file.attribute.BasicFileAttributes;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FileAlreadyExistsException;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.internal.SQLConf;

/**
 * Streaming checkpoint files on a local disk through {@code java.nio}: the offset and commit logs,
 * the sources' metadata and the state stores' changelog and snapshot files of every micro-batch.
 *
 * <p>Spark's default manager goes through Hadoop's local file system, which writes a {@code .crc}
 * side file next to each file and, without Hadoop's native library (not in the pyspark wheel),
 * starts a process per file: {@code chmod} for each file created and {@code readlink} for each
 * rename — measured with strace, a rate source to Spark's noop sink: ~22 processes per micro-batch
 * on the driver, on top of the state stores' own. Here a file is written to a hidden temporary
 * file in its folder and published with one system call: {@code link(2)} when it must not replace
 * an existing file (fails atomically if one is there, as Spark's contract asks:
 * {@link FileAlreadyExistsException}), {@code rename(2)} when it may. No side file, no process.
 * Like Hadoop's local file system, nothing is synced to the device: a file is durable against a
 * process crash, not a power loss.
 *
 * <p>A path on any other file system (HDFS, an object store) goes to Spark's own manager for it,
 * unchanged. Set as {@code spark.sql.streaming.checkpointFileManagerClass}.
 */
public final class LocalCheckpointFileManager implements CheckpointFileManager {
  private static final String CONF_KEY = "spark.sql.streaming.checkpointFileManagerClass";
  private static final int BUFFER = 64 * 1024;

  private final Path root;
  /** Files of a local path (opened and listed through Hadoop's raw local FS: no process). */
  private final RawLocalFileSystem local;
  /** Spark's own manager, for a path on another file system. */
  private final CheckpointFileManager other;

  public LocalCheckpointFileManager(Path path, Configuration conf) {
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

  @Override
  public CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
    if (other != null) {
      return other.createAtomic(path, overwriteIfPossible);
    }
    java.nio.file.Path target = file(path);
    java.nio.file.Path temp =
        target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
    OutputStream out;
    try {
      out = Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE);
    } catch (NoSuchFileException missingFolder) {
      call(() -> Files.createDirectories(target.getParent()));
      out = call(() -> Files.newOutputStream(temp, StandardOpenOption.CREATE_NEW, StandardOpenOption.WRITE));
    } catch (IOException e) {
      throw sneaky(e);
    }
    return new AtomicFile(new BufferedOutputStream(out, BUFFER), temp, target, overwriteIfPossible);
  }

  @Override
  public FSDataInputStream open(Path path) {
    return other != null ? other.open(path) : call(() -> local.open(path));
  }

  @Override
  public FileStatus[] list(Path path, PathFilter filter) {
    return other != null ? other.list(path, filter) : call(() -> local.listStatus(path, filter));
  }

  @Override
  public void mkdirs(Path path) {
    if (other != null) {
      other.mkdirs(path);
    } else {
      call(() -> Files.createDirectories(file(path)));
    }
  }

  @Override
  public boolean exists(Path path) {
    return other != null ? other.exists(path) : Files.exists(file(path));
  }

  @Override
  public void delete(Path path) {
    if (other != null) {
      other.delete(path);
    } else {
      call(() -> deleteTree(file(path)));
    }
  }

  @Override
  public boolean isLocal() {
    return other == null || other.isLocal();
  }

  @Override
  public Path createCheckpointDirectory() {
    if (other != null) {
      return other.createCheckpointDirectory();
    }
    Path qualified = local.makeQualified(root);
    mkdirs(qualified);
    return qualified;
  }

  @Override
  public void close() {
    if (other != null) {
      other.close();
    }
  }

  private java.nio.file.Path file(Path path) {
    return local.pathToFile(path).toPath();
  }

  /** Hadoop's checksum side file of {@code file} (Spark's own manager writes one per file). */
  private static java.nio.file.Path checksumOf(java.nio.file.Path file) {
    return file.resolveSibling("." + file.getFileName() + ".crc");
  }

  private static Void deleteTree(java.nio.file.Path top) throws IOException {
    if (!Files.isDirectory(top, java.nio.file.LinkOption.NOFOLLOW_LINKS)) {
      Files.deleteIfExists(top);
      Files.deleteIfExists(checksumOf(top));
      return null;
    }
    try {
      Files.walkFileTree(top, new SimpleFileVisitor<java.nio.file.Path>() {
        @Override
        public FileVisitResult visitFile(java.nio.file.Path f, BasicFileAttributes attrs)
            throws IOException {
          Files.deleteIfExists(f);
          return FileVisitResult.CONTINUE;
        }

        @Override
        public FileVisitResult postVisitDirectory(java.nio.file.Path d, IOException e)
            throws IOException {
          if (e != null && !(e instanceof NoSuchFileException)) {
            throw e;
          }
          Files.deleteIfExists(d);
          return FileVisitResult.CONTINUE;
        }
      });
    } catch (NoSuchFileException gone) {
      // deleted meanwhile: nothing left to delete
    }
    return null;
  }

  /** Written to {@code temp}; on close, published as {@code target} in one system call. */
  private static final class AtomicFile extends CancellableFSDataOutputStream {
    private final java.nio.file.Path temp;
    private final java.nio.file.Path target;
    private final boolean overwrite;
    private boolean done;

    AtomicFile(OutputStream out, java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) {
      super(out);
      this.temp = temp;
      this.target = target;
      this.overwrite = overwrite;
    }

    @Override
    public synchronized void close() throws IOException {
      if (done) {
        return;
      }
      done = true;
      try {
        super.close();
        publish();
      } finally {
        Files.deleteIfExists(temp);
      }
      if (SQLConf.get().checkpointRenamedFileCheck() && !Files.exists(target)) {
        throw new IllegalStateException(
            "Renamed temp file " + temp + " to " + target + ". But " + target + " does not exist.");
      }
    }

    private void publish() throws IOException {
      if (overwrite) {
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);  // rename(2) replaces
        // A checksum Hadoop wrote for the replaced file (a checkpoint begun with Spark's own
        // manager) would no longer match: Spark's manager would then refuse to read the file.
        Files.deleteIfExists(checksumOf(target));
        return;
      }
      try {
        Files.createLink(target, temp);  // link(2): fails if the target exists, atomically
      } catch (java.nio.file.FileAlreadyExistsException exists) {
        throw new FileAlreadyExistsException(target + " already exists (not replaced)");
      } catch (UnsupportedOperationException | FileSystemException noLinks) {
        // A file system without hard links: check, then rename (Hadoop's own order).
        if (Files.exists(target)) {
          throw new FileAlreadyExistsException(target + " already exists (not replaced)");
        }
        Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
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
        Files.deleteIfExists(temp);
      } catch (IOException ignored) {
        // a hidden temporary file left behind is never read
      }
    }
  }

  private interface IoCall<T> {
    T call() throws IOException;
  }

  private static <T> T call(IoCall<T> body) {
    try {
      return body.call();
    } catch (IOException e) {
      throw sneaky(e);
    }
  }

  /**
   * Rethrows a checked exception unchanged: the Scala interface declares none, and Spark's
   * callers catch Hadoop's (FileNotFoundException, FileAlreadyExistsException) by type.
   */
  @SuppressWarnings("unchecked")
  private static <E extends Throwable> RuntimeException sneaky(Throwable e) throws E {
    throw (E) e;
  }
}
