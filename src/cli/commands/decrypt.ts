import type { Command } from 'commander';
import type { Bind } from '../command.js';
import type { CommandContext } from '../context.js';
import { UsageError } from '../../errors.js';
import { decryptMaterial } from '../connect/profile.js';
import { printUserInfo } from '../views/user-view.js';
import { decryptField, FieldDecryptionError } from '../../login/field-cipher.js';
import { decryptionError, decryptUserInfo, unwrapUserInfo } from '../../login/user-info.js';
import { parseJsonInput, readInput } from '../terminal/input.js';

interface DecryptOptions {
  value?: string;
  key?: string;
  aad?: string;
}

export function registerDecrypt(program: Command, bind: Bind): void {
  program
    .command('decrypt')
    .description(
      'Decrypt the personal fields (name, phone, birthday, ci, di, gender, nationality, email) of a ' +
        'login-me response: the whole envelope, its success object, or a bare UserInfo. Reads FILE or stdin.\n\n' +
        'Key and AAD come from --key/--aad, then MINIAPP_DECRYPT_KEY/MINIAPP_DECRYPT_AAD, then the profile. ' +
        'Prefer the environment or the profile: flags end up in shell history.',
    )
    .argument('[file]', 'file holding the response; "-" or nothing reads stdin')
    .option('--value <base64>', 'decrypt one encrypted value instead of a response')
    .option('--key <key>', 'AES-256 key: 64 hex or 44 Base64 characters')
    .option('--aad <aad>', 'AAD: text:VALUE, hex:HEX, or bare (hex when it is hex digits of even length, else text)')
    .addHelpText('after', '\nExamples:\n  miniapp decrypt response.json\n  curl -s ... | miniapp decrypt --json\n  miniapp decrypt --value "q7Yv...=="')
    .action(bind(runDecrypt));
}

async function runDecrypt(cc: CommandContext, command: Command): Promise<void> {
  const options = command.opts<DecryptOptions>();
  const [file] = command.processedArgs as [string | undefined];
  if (options.value !== undefined && file !== undefined) {
    throw new UsageError('give either --value or a FILE, not both');
  }
  const material = await decryptMaterial(cc, options);
  const { key, aad } = material;

  if (options.value !== undefined) {
    try {
      const value = decryptField(options.value, key.bytes, aad.bytes);
      if (cc.out.json) cc.out.printJson({ value });
      else cc.out.line(value);
      return;
    } catch (error) {
      if (!(error instanceof FieldDecryptionError)) throw error;
      // Input that cannot be a sealed field is bad input, not a key problem.
      if (error.reason === 'not-base64')
        throw new UsageError('--value is not Base64: an encrypted field is Base64 of IV (12 bytes) + ciphertext + tag (16 bytes)');
      if (error.reason === 'too-short') {
        throw new UsageError('--value is too short to be an encrypted field: it must decode to at least 28 bytes (IV 12 + ciphertext + tag 16)');
      }
      throw decryptionError({ user: {}, decrypted: [], failed: [{ field: '--value', reason: error.reason }] }, { '--value': options.value }, material, {
        showAad: true,
      });
    }
  }

  const text = await readInput(file, cc.io.stdin, { what: 'login-me response' });
  const info = unwrapUserInfo(parseJsonInput(text, 'login-me response'));
  const outcome = decryptUserInfo(info, key.bytes, aad.bytes);
  if (outcome.failed.length > 0) throw decryptionError(outcome, info, material, { showAad: true });
  printUserInfo(cc.out, outcome.user);
}
