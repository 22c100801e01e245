/** Base class of every error this library throws on purpose. `code` is stable across releases. */
export class RwLockError extends Error {
  readonly code: string;
  constructor(code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = new.target.name;
    this.code = code;
  }
}
