/**
 * The `onChange` listeners of a credential source: each is called with the new credentials; one
 * that throws is logged and does not stop the others (a renewal must reach every listener).
 */
import type { Logger } from 'pino';

export class ChangeListeners<T> {
  private readonly listeners = new Set<(c: T) => void>();

  constructor(private readonly logger: Logger) {}

  /** Adds `listener`; returns its unsubscribe function. */
  add(listener: (c: T) => void): () => void {
    // A wrapper per subscription, so the same function subscribed twice is unsubscribed once each.
    const entry = (c: T): void => listener(c);
    this.listeners.add(entry);
    return () => {
      this.listeners.delete(entry);
    };
  }

  emit(c: T): void {
    for (const listener of [...this.listeners]) {
      try {
        listener(c);
      } catch (err) {
        this.logger.error({ err }, 'a mesh credentials listener failed');
      }
    }
  }

  clear(): void {
    this.listeners.clear();
  }
}
