// Exclusive lock on a data directory: a lock file created with O_EXCL holding `pid:starttime`. A lock whose
// process is gone (e.g. after SIGKILL) is taken over at once, also when a new process got the same pid (containers
// restart as pid 1): the start time tells the two apart. A live holder makes start-up fail with a clear message.
import fs from 'node:fs';
import path from 'node:path';

/** Start time of a process in clock ticks since boot (Linux /proc), or '' where unknown. */
function startTime(pid: number): string {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? '';
  } catch {
    return '';
  }
}

function holderAlive(pid: number, started: string): boolean {
  try {
    process.kill(pid, 0);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EPERM') return false;
  }
  const now = startTime(pid);
  return !started || !now || now === started;
}

export class DirLockedError extends Error {
  constructor(dir: string, pid: number) {
    super(`dataDir ${dir} is in use by process ${pid}; only one Cinder process may use an embedded database`);
    this.name = 'DirLockedError';
  }
}

const heldHere = new Set<string>();

export function acquireDirLock(dir: string): () => void {
  const file = path.resolve(dir, 'cinder.lock');
  if (heldHere.has(file)) throw new DirLockedError(dir, process.pid);
  const me = `${process.pid}:${startTime(process.pid)}`;
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const fd = fs.openSync(file, 'wx');
      fs.writeSync(fd, me);
      fs.closeSync(fd);
      heldHere.add(file);
      let released = false;
      const release = (): void => {
        if (released) return;
        released = true;
        heldHere.delete(file);
        process.removeListener('exit', release);
        try {
          if (fs.readFileSync(file, 'utf8') === me) fs.unlinkSync(file);
        } catch {
          // already gone
        }
      };
      process.on('exit', release);
      return release;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      const [pidText = '', started = ''] = fs.readFileSync(file, 'utf8').trim().split(':');
      const pid = Number(pidText);
      if (pid && pid !== process.pid && holderAlive(pid, started)) throw new DirLockedError(dir, pid);
      fs.rmSync(file, { force: true });
    }
  }
  throw new Error(`could not lock dataDir ${dir}`);
}
