/**
 * What the user.v1 protocol says beside its messages, in a module without
 * grpc-js: the light path of `miniapp users list` (no grpc-js, see
 * grpc/client/light-call.ts) reads these headers as the grpc-js client does.
 * The messages themselves are encoded and decoded by grpc/proto-wire.ts.
 */

/**
 * ListUsers' initial metadata: the users matching the filter on all pages,
 * the page size applied (0 = all), and the page token of the next page
 * (absent on the last page).
 */
export const LIST_TOTAL_HEADER = 'x-total-count';
export const LIST_PAGE_SIZE_HEADER = 'x-page-size';
export const LIST_NEXT_PAGE_TOKEN_HEADER = 'x-next-page-token';
