/**
 * The order test files start in. vitest starts the files it has no timings
 * for (a fresh clone: nothing cached yet) largest first, and some of the
 * longest suites are small files that mostly wait on servers, processes and
 * fault windows: started last, one of them would run on alone at the end
 * while the other workers sit idle. These start first, longest first; the
 * rest follow in vitest's own order (its cached timings when it has them).
 */
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/** About the longest suites on 2 cores, longest first (from vitest's per-file durations). */
export const LONGEST_SUITES: readonly string[] = [
  'test/server/chaos.test.ts',
  'test/readme.test.ts',
  'test/blog/openapi-fuzz.test.ts',
  'test/users/server.test.ts',
  'test/users/watch-resume.test.ts',
  'test/cli/quick.test.ts',
  'test/users/cli/streams.test.ts',
  'test/users/cli/crud.test.ts',
  'test/commerce/checkout.test.ts',
  'test/store/network-faults.test.ts',
  'test/webhooks/dispatcher.test.ts',
  'test/commerce/cli.test.ts',
];

export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    const rank = (spec: TestSpecification) => {
      const at = LONGEST_SUITES.indexOf(relative(this.ctx.config.root, spec.moduleId).split('\\').join('/'));
      return at < 0 ? LONGEST_SUITES.length : at;
    };
    return sorted
      .map((spec, index) => ({ spec, index }))
      .sort((a, b) => rank(a.spec) - rank(b.spec) || a.index - b.index)
      .map(({ spec }) => spec);
  }
}
