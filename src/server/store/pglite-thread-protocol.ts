/**
 * What the server and the embedded database's thread (pglite-worker.ts) say to each other: one request
 * per message, answered by id; both ends are this package, so the shapes are types, not parsed.
 */
export type ThreadRequest =
  | {
      readonly id: number;
      readonly op: 'open';
      readonly dir: string;
      readonly settings: string[];
      /** A template to copy into `dir` first (a new database). */
      readonly seed: string | undefined;
    }
  | {
      readonly id: number;
      readonly op: 'query';
      readonly text: string;
      readonly params: unknown[] | undefined;
      readonly rowMode: 'object' | 'array';
      /** Type OIDs whose values are returned as Postgres printed them. */
      readonly rawTypes: number[];
    }
  | { readonly id: number; readonly op: 'exec'; readonly text: string }
  | { readonly id: number; readonly op: 'close' };

export interface ThreadError {
  readonly name: string;
  readonly message: string;
  /** A DatabaseError's own fields: code, detail, constraint, severity… */
  readonly fields: Record<string, string | number | boolean>;
}

export type ThreadReply =
  | { readonly id: number; readonly ok: true; readonly value: unknown }
  | { readonly id: number; readonly ok: false; readonly error: ThreadError };

export interface ThreadResults<T> {
  readonly rows: T[];
  readonly fields: { name: string; dataTypeID: number }[];
  readonly affectedRows?: number;
}
