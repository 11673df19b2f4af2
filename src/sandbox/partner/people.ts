/**
 * Deterministic, realistic personal data for a sandbox user: the same
 * userKey always gets the same person, so tests and demos can rely on it.
 */
import { createHash } from 'node:crypto';

export interface Person {
  name: string;
  phone: string;
  birthday: string;
  ci: string;
  di: null;
  gender: 'MALE' | 'FEMALE';
  nationality: 'LOCAL' | 'FOREIGNER';
  email: string | null;
}

const SURNAMES = ['김', '이', '박', '최', '정', '강', '조', '윤', '장', '임', '한', '오', '서', '신', '권', '황'];
const GIVEN = ['민', '서', '지', '현', '준', '우', '은', '하', '도', '윤', '수', '예', '연', '영', '진', '호', '아', '유', '재', '원'];
const LATIN = ['minji', 'seoyeon', 'jihoon', 'hyunwoo', 'doyun', 'haeun', 'yejin', 'sujin', 'jaewon', 'yuna'];

/** A small seeded generator (mulberry32): enough spread for test data, fully reproducible. */
function generator(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function personFor(userKey: number): Person {
  const random = generator(userKey * 2654435761);
  const pick = <T>(list: readonly T[]): T => list[Math.floor(random() * list.length)]!;
  const digits = (count: number) => Array.from({ length: count }, () => Math.floor(random() * 10)).join('');
  const year = 1960 + Math.floor(random() * 46);
  const month = 1 + Math.floor(random() * 12);
  const day = 1 + Math.floor(random() * 28);
  const gender = random() < 0.5 ? 'MALE' : 'FEMALE';
  const nationality = random() < 0.95 ? 'LOCAL' : 'FOREIGNER';
  const email = random() < 0.75 ? `${pick(LATIN)}${userKey}@example.com` : null;
  return {
    name: `${pick(SURNAMES)}${pick(GIVEN)}${pick(GIVEN)}`,
    phone: `010${digits(8)}`,
    birthday: `${year}${String(month).padStart(2, '0')}${String(day).padStart(2, '0')}`,
    ci: createHash('sha512').update(`sandbox-ci:${userKey}`).digest('base64'),
    di: null,
    gender,
    nationality,
    email,
  };
}
