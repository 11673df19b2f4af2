/**
 * The little of Meta's facebook-nodejs-business-sdk (a Flow package without
 * TypeScript types) that the interop tests drive.
 */
declare module 'facebook-nodejs-business-sdk' {
  // biome-ignore lint/complexity/noStaticOnlyClass: the SDK's class as it is published, declared, not written here.
  export class FacebookAdsApi {
    static readonly GRAPH: string;
    static readonly VERSION: string;
    static init(accessToken: string, locale?: string, crashLog?: boolean): FacebookAdsApi;
  }

  /** A page of an edge: the objects of this page, and how to get the next. */
  export interface Cursor<T> extends Array<T> {
    hasNext(): boolean;
    next(): Promise<Cursor<T>>;
    paging?: { cursors?: { before?: string; after?: string }; next?: string };
  }

  export class AbstractCrudObject {
    constructor(id: string | null, data?: Record<string, unknown>);
    readonly id: string;
    get(fields: string[], params?: Record<string, unknown>): Promise<this>;
    exportAllData(): Record<string, unknown>;
    [field: string]: unknown;
  }

  export class User extends AbstractCrudObject {
    getAccounts(fields: string[], params?: Record<string, unknown>): Promise<Cursor<Page>>;
  }
  export class Page extends AbstractCrudObject {
    static readonly Fields: Readonly<Record<string, string>>;
  }
  export class IGUser extends AbstractCrudObject {
    static readonly Fields: Readonly<Record<string, string>>;
    getMedia(fields: string[], params?: Record<string, unknown>): Promise<Cursor<IGMedia>>;
    getInsights(fields: string[], params?: Record<string, unknown>): Promise<Cursor<InstagramInsightsResult>>;
  }
  export class IGMedia extends AbstractCrudObject {
    static readonly Fields: Readonly<Record<string, string>>;
    getInsights(fields: string[], params?: Record<string, unknown>): Promise<Cursor<InstagramInsightsResult>>;
  }
  export class InstagramInsightsResult extends AbstractCrudObject {
    static readonly Metric: Readonly<Record<string, string>>;
    static readonly Period: Readonly<Record<string, string>>;
    static readonly MetricType: Readonly<Record<string, string>>;
  }
}
