// Types of dist-stamp.mjs (plain JavaScript: it runs before anything is compiled).
export declare const ROOT: string;
export declare const DIST: string;
export interface SourceStamp {
  readonly newestMtimeMs: number;
  readonly entries: number;
}
export declare function sourceStamp(root?: string): SourceStamp;
export declare function distIsFresh(root?: string): boolean;
