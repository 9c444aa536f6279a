import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { jsonCodec } from '../shared/codec';
import { ErrorCodes, hasCode, ShardcronError } from '../shared/errors';
import { silentLogger, type Logger } from '../shared/logger';
import { registryPaths } from '../shared/registry/registry-paths';
import { CoalescingRunner } from '../shared/coalescing-runner';
import { TypedEmitter } from '../shared/typed-emitter';
import { ZkError, type ZkClient, type ZkWatchEvent } from '../shared/zk';

/**
 * `follower`: a candidate waiting its turn. `leader`: elected and connected. `suspended`: elected
 * but the connection dropped; nothing may be dispatched until it comes back (or the session is lost).
 */
export type LeadershipState = 'idle' | 'follower' | 'leader' | 'suspended' | 'closed';

export interface LeaderElectionEvents {
  [event: string]: object;
  'leader:elected': { epoch: number; instanceId: string };
  'leader:suspended': { epoch: number };
  'leader:resumed': { epoch: number };
  'leader:lost': { epoch: number; reason: 'session-lost' | 'candidate-gone' | 'closed' };
  /**
   * Whether this candidate is next in line: its predecessor is the leader, so it leads as soon as
   * that candidate goes (a warm standby loads the jobs meanwhile). `false` when it no longer is
   * without having been elected (its session was lost, or it closed).
   */
  standby: { next: boolean };
  state: { from: LeadershipState; to: LeadershipState };
}

const candidateSchema = z.object({ instanceId: z.string(), token: z.string() });
const candidateCodec = jsonCodec(candidateSchema, 'election candidate');
const leaderCodec = jsonCodec(z.object({ instanceId: z.string(), epoch: z.number().int() }), 'leader node');

/** The node a leader's writes are fenced on. Candidate nodes are never modified: version 0. */
export interface Fence {
  path: string;
  version: number;
}

/** Sequence number of an `n_0000000042` candidate node. */
export function candidateSequence(name: string): number {
  const match = /^n_(\d{10})$/.exec(name);
  return match ? Number(match[1]) : Number.NaN;
}

/**
 * Leader election with Curator's LeaderLatch recipe: every candidate creates an ephemeral
 * sequential node; the lowest leads; each other candidate watches only its predecessor (and the one
 * before it, to learn when it is next in line: {@link LeaderElectionEvents.standby}), so a leader's
 * death wakes one or two processes, not the herd. The epoch is the candidate's sequence number,
 * which only grows. Leadership is suspended the moment the connection drops and lost with the
 * session; every leader write is fenced on the candidate node (see {@link fence}).
 */
export class LeaderElection extends TypedEmitter<LeaderElectionEvents> {
  private stateValue: LeadershipState = 'idle';
  private candidate: { path: string; epoch: number } | undefined;
  private readonly token = randomUUID();
  /** Re-examinations of the candidate list, serialized (flow 2 must never run twice at once). */
  private readonly evaluations = new CoalescingRunner(
    () => this.evaluateOnce(),
    // Connection trouble: a reconnect or a new session calls evaluate again.
    (err) => this.log.warn({ err }, 'leader election step failed; waiting for the connection'),
  );
  private closing: Promise<void> | undefined;
  private nextInLine = false;
  private readonly unsubscribe: Array<() => void> = [];
  private readonly log: Logger;

  constructor(
    private readonly zk: ZkClient,
    private readonly instanceId: string,
    logger: Logger = silentLogger,
  ) {
    const log = logger.child({ component: 'election', instanceId });
    super(log);
    this.log = log;
  }

  get state(): LeadershipState {
    return this.stateValue;
  }

  get isLeader(): boolean {
    return this.stateValue === 'leader';
  }

  /** Current epoch while leading (or suspended), else undefined. */
  get epoch(): number | undefined {
    return this.stateValue === 'leader' || this.stateValue === 'suspended' ? this.candidate?.epoch : undefined;
  }

  /** The fence for leader writes; throws LEADERSHIP_LOST when not the connected leader. */
  fence(): Fence {
    if (this.stateValue !== 'leader' || !this.candidate) {
      throw new ShardcronError(ErrorCodes.LEADERSHIP_LOST, `instance ${this.instanceId} is not the leader (state ${this.stateValue})`);
    }
    return { path: this.candidate.path, version: 0 };
  }

  async start(): Promise<this> {
    this.unsubscribe.push(
      this.zk.on('suspended', () => this.onSuspended()),
      this.zk.on('reconnected', () => void this.evaluate()),
      this.zk.on('lost', () => this.onSessionLost()),
      this.zk.on('session:renewed', () => void this.evaluate()),
    );
    await this.zk.ensurePath(registryPaths.election());
    this.transition('follower');
    await this.evaluate();
    return this;
  }

  close(): Promise<void> {
    return (this.closing ??= this.doClose());
  }

  private onSuspended(): void {
    if (this.stateValue !== 'leader') return;
    this.transition('suspended');
    this.emit('leader:suspended', { epoch: this.candidate!.epoch });
  }

  private onSessionLost(): void {
    const epoch = this.candidate?.epoch ?? 0;
    const wasLeading = this.stateValue === 'leader' || this.stateValue === 'suspended';
    // The candidate node died with the session; a new one is made when the new session arrives.
    this.candidate = undefined;
    if (this.stateValue === 'closed') return;
    this.transition('follower');
    this.setNextInLine(false);
    if (wasLeading) this.emit('leader:lost', { epoch, reason: 'session-lost' });
  }

  private evaluate(): Promise<void> {
    if (this.closing || this.stateValue === 'closed') return Promise.resolve();
    return this.evaluations.request();
  }

  private async evaluateOnce(): Promise<void> {
    if (this.zk.state !== 'connected') return;
    const names = (await this.zk.children(registryPaths.election())).filter((n) => !Number.isNaN(candidateSequence(n)));
    names.sort((a, b) => candidateSequence(a) - candidateSequence(b));
    const mine = this.candidate && names.find((n) => registryPaths.electionCandidate(n) === this.candidate!.path);
    if (!mine) {
      const wasLeading = this.stateValue === 'leader' || this.stateValue === 'suspended';
      if (wasLeading) {
        this.transition('follower');
        this.emit('leader:lost', { epoch: this.candidate?.epoch ?? 0, reason: 'candidate-gone' });
      }
      await this.createCandidate();
      this.evaluations.again();
      return;
    }
    const index = names.indexOf(mine);
    if (index === 0) {
      if (this.stateValue === 'suspended') {
        this.transition('leader');
        this.emit('leader:resumed', { epoch: this.candidate!.epoch });
      } else if (this.stateValue !== 'leader') {
        await this.becomeLeader();
      }
      return;
    }
    this.setNextInLine(index === 1);
    // Two predecessors are watched: a candidate becomes next in line only when one of them goes
    // (with both there, one candidate still stands between it and the leader). Each candidate
    // node is watched by two candidates at most, so a leader's death still wakes one or two.
    const watched = names.slice(Math.max(0, index - 2), index).map((name) => registryPaths.electionCandidate(name));
    const stats = await Promise.all(watched.map((path) => this.zk.exists(path, this.onPredecessorEvent)));
    if (stats.some((stat) => !stat)) this.evaluations.again();
  }

  /** One watcher for every predecessor: the client keeps one registration per function and path. */
  private readonly onPredecessorEvent = (event: ZkWatchEvent): void => {
    if (event.type === 'deleted') void this.evaluate();
  };

  private async createCandidate(): Promise<void> {
    const data = candidateCodec.encode({ instanceId: this.instanceId, token: this.token });
    let path: string;
    try {
      path = await this.zk.create(registryPaths.electionCandidatePrefix(), data, 'ephemeral_sequential');
    } catch (err) {
      if (!(err instanceof ZkError && err.code === ErrorCodes.ZK_CONNECTION_LOSS)) throw err;
      // The create may have happened before the connection dropped: look for our token.
      path = (await this.findOwnCandidate()) ?? (await this.zk.create(registryPaths.electionCandidatePrefix(), data, 'ephemeral_sequential'));
    }
    const name = path.slice(path.lastIndexOf('/') + 1);
    this.candidate = { path, epoch: candidateSequence(name) };
    this.log.info({ epoch: this.candidate.epoch }, 'joined the leader election');
  }

  private async findOwnCandidate(): Promise<string | undefined> {
    for (const name of await this.zk.children(registryPaths.election())) {
      const path = registryPaths.electionCandidate(name);
      const text = await this.zk.getText(path);
      try {
        if (text !== undefined && candidateCodec.decode(Buffer.from(text), path).token === this.token) return path;
      } catch {
        // Someone else's malformed node: not ours.
      }
    }
    return undefined;
  }

  private async becomeLeader(): Promise<void> {
    const candidate = this.candidate!;
    const fence = { path: candidate.path, version: 0 };
    const leaderPath = registryPaths.leader();
    const data = leaderCodec.encode({ instanceId: this.instanceId, epoch: candidate.epoch });
    const existing = await this.zk.exists(leaderPath);
    const tx = this.zk.fencedMulti(fence);
    // A leftover leader node can only belong to a session that is ending; replace it.
    if (existing) tx.delete(leaderPath, existing.version);
    try {
      await tx.create(leaderPath, data, 'ephemeral').commit();
    } catch (err) {
      // The leftover node went (or changed) between the look and the write: look again.
      if (!hasCode(err, ErrorCodes.ZK_NO_NODE) && !hasCode(err, ErrorCodes.ZK_NODE_EXISTS) && !hasCode(err, ErrorCodes.ZK_BAD_VERSION)) throw err;
      this.log.info({ err }, 'the leader node changed while taking it; trying again');
      this.evaluations.again();
      return;
    }
    // Elected: a standby's loaded jobs become the leader's, so no `standby` event.
    this.nextInLine = false;
    this.transition('leader');
    this.log.info({ epoch: candidate.epoch }, 'elected leader');
    this.emit('leader:elected', { epoch: candidate.epoch, instanceId: this.instanceId });
  }

  private setNextInLine(next: boolean): void {
    if (this.nextInLine === next) return;
    this.nextInLine = next;
    this.emit('standby', { next });
  }

  private transition(to: LeadershipState): void {
    const from = this.stateValue;
    if (from === to) return;
    this.stateValue = to;
    this.log.info({ from, to }, 'leadership state');
    this.emit('state', { from, to });
  }

  private async doClose(): Promise<void> {
    const wasLeading = this.stateValue === 'leader' || this.stateValue === 'suspended';
    const epoch = this.candidate?.epoch ?? 0;
    for (const off of this.unsubscribe.splice(0)) off();
    await this.evaluations.stop();
    this.setNextInLine(false);
    this.transition('closed');
    if (wasLeading) this.emit('leader:lost', { epoch, reason: 'closed' });
    // Deleting our candidate lets the next candidate take over now, not one session timeout later.
    if (this.candidate && this.zk.state === 'connected') {
      await this.zk.delete(this.candidate.path).catch((err) => this.log.debug({ err }, 'candidate already gone'));
    }
    this.candidate = undefined;
    this.removeAllListeners();
  }
}
