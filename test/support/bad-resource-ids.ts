// Resource ids the library refuses, with what the refusal must say: checked on the pure function
// (test/unit/resource-id.test.ts) and through the manager, with nothing written (test/validation.test.ts).
export const BAD_RESOURCE_IDS: ReadonlyArray<[string, unknown, RegExp]> = [
  ['empty', '', /empty/],
  ['over 255 UTF-8 bytes', 'x'.repeat(256), /256 bytes/],
  ['over 255 bytes though under 255 characters', 'é'.repeat(128), /256 bytes/],
  ['a number', 42, /must be a string, got number/],
  ['null', null, /got null/],
  ['undefined', undefined, /got undefined/],
  ['an object', { id: 'x' }, /got object/],
  ['a lone surrogate', 'loan-\ud800', /lone surrogate/],
];
