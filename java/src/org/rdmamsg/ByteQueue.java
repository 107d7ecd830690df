package org.rdmamsg;

import java.io.IOException;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.nio.channels.ReadableByteChannel;
import java.nio.channels.WritableByteChannel;

/**
 * A growable queue of bytes in a direct buffer (the channel reads into and
 * writes from it without the JDK's temporary copies): bytes are appended at
 * the end and consumed from the start. Absolute, little-endian access for the
 * codec. Not thread-safe; the client guards it with its lock.
 */
final class ByteQueue {
  private ByteBuffer buf;
  private int start;
  private int end;

  ByteQueue(int capacity) {
    buf = ByteBuffer.allocateDirect(capacity).order(ByteOrder.LITTLE_ENDIAN);
  }

  int size() {
    return end - start;
  }

  boolean isEmpty() {
    return end == start;
  }

  /** The backing buffer, for absolute reads and writes at the indexes below. */
  ByteBuffer buffer() {
    return buf;
  }

  /** The index of the first unconsumed byte. */
  int start() {
    return start;
  }

  /** Makes room for {@code n} bytes after the end; returns the index where they go. */
  int reserve(int n) {
    if (buf.capacity() - end >= n) return end;
    final int size = size();
    if (start >= size && buf.capacity() - size >= n) {
      // The bytes move to the front without overlapping themselves.
      buf.put(0, buf, start, size);
    } else {
      long want = Math.max(2L * buf.capacity(), (long) size + n);
      if (want > Integer.MAX_VALUE - 8) want = (long) size + n;
      ByteBuffer bigger =
          ByteBuffer.allocateDirect((int) want).order(ByteOrder.LITTLE_ENDIAN);
      bigger.put(0, buf, start, size);
      buf = bigger;
    }
    start = 0;
    end = size;
    return end;
  }

  /** Appends the {@code n} bytes written after {@link #reserve}. */
  void commit(int n) {
    end += n;
  }

  /** Drops {@code n} bytes from the start. */
  void consume(int n) {
    start += n;
    if (start == end) start = end = 0;
  }

  /** Drops the {@code n} bytes last committed. */
  void truncate(int n) {
    end -= n;
  }

  /** A view of the queued bytes, for a gathering write. */
  ByteBuffer queued() {
    return buf.duplicate().limit(end).position(start);
  }

  /** Writes what the channel takes; the number of bytes written. */
  int writeTo(WritableByteChannel ch) throws IOException {
    if (isEmpty()) return 0;
    ByteBuffer view = queued();
    int n = ch.write(view);
    consume(n);
    return n;
  }

  /**
   * Reads once into at least {@code room} bytes of free space; the count
   * read, or -1 at the end of the stream.
   */
  int readFrom(ReadableByteChannel ch, int room) throws IOException {
    int at = reserve(room);
    ByteBuffer view = buf.duplicate().limit(buf.capacity()).position(at);
    int n = ch.read(view);
    if (n > 0) end += n;
    return n;
  }
}
