"""Files written whole or not at all, shared by every writer of the package
(`save_chain`, `Posterior.save`, `SamplingCallback`'s backups).

`atomic_write(path, write)` calls `write(file)` on a temporary file in the
same directory, flushes it to disk (fsync), renames it over `path`
(`os.replace`, atomic on POSIX and Windows) and syncs the directory entry, so
that a kill, a power loss or a full disk at any point leaves either the old
file or the new one at `path`, never half a file.

A temporary's name is unique to its writer (`<name>.tmp-<host>-<pid>-<random>`),
so two processes writing one path never touch each other's temporaries, and
only a temporary whose writer is known to be dead (same host, no such
process) is removed by a later writer.
"""

import os
import secrets
import socket

__all__ = ["atomic_write", "fsync_directory", "remove_dead_temporaries",
           "temporary_name"]

_TMP = ".tmp-"


def _host():
  # A '-' in the host name would make the name ambiguous to parse.
  return socket.gethostname().replace("-", "_") or "localhost"


def temporary_name(path):
  """A temporary path beside `path`, unique to this writer and this call."""
  return (f"{path}{_TMP}{_host()}-{os.getpid()}-{secrets.token_hex(4)}")


def _writer_is_dead(name, prefix):
  """True if the temporary `name` (beside `prefix`) was left by a process of
  this host that no longer runs; False if alive, foreign or unknown."""
  parts = name[len(prefix):].split("-")
  if len(parts) < 3 or parts[0] != _host() or not parts[1].isdigit():
    return False
  pid = int(parts[1])
  if pid == os.getpid():
    return False  # Perhaps another thread of ours, writing now.
  if os.name == "nt":
    return False  # os.kill(pid, 0) would terminate the process there.
  try:
    os.kill(pid, 0)
  except ProcessLookupError:
    return True
  except OSError:
    return False  # Alive under another user, or cannot tell.
  return False


def remove_dead_temporaries(path):
  """Removes temporaries of `path` left by killed writers of this host;
  returns the removed paths. A live writer's temporary is never removed."""
  directory = os.path.dirname(os.path.abspath(path))
  prefix = os.path.basename(path) + _TMP
  try:
    names = os.listdir(directory)
  except OSError:
    return []
  removed = []
  for name in names:
    if name.startswith(prefix) and _writer_is_dead(name, prefix):
      try:
        os.remove(os.path.join(directory, name))
        removed.append(os.path.join(directory, name))
      except OSError:
        pass  # Removed by another writer meanwhile.
  return removed


def fsync_directory(directory):
  """Syncs a directory entry (the rename itself survives a power loss);
  a no-op where the file system cannot (e.g. Windows)."""
  try:
    fd = os.open(directory, os.O_RDONLY)
  except OSError:
    return
  try:
    os.fsync(fd)
  except OSError:
    pass
  finally:
    os.close(fd)


def atomic_write(path, write):
  """Writes `path` whole or not at all: `write(f)` on a binary file object.

  On any failure (an exception from `write`, a full disk) the temporary is
  removed and the old `path`, if any, is untouched.
  """
  path = os.fsdecode(os.fspath(path))
  directory = os.path.dirname(os.path.abspath(path))
  remove_dead_temporaries(path)
  tmp = temporary_name(path)
  try:
    with open(tmp, "xb") as f:
      write(f)
      f.flush()
      os.fsync(f.fileno())
    os.replace(tmp, path)
  except BaseException:
    try:
      os.remove(tmp)
    except OSError:
      pass
    raise
  fsync_directory(directory)
  return path
