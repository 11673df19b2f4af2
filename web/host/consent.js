/**
 * What the host app does when a mini-app calls appLogin(): a code at once
 * for a returning user; for a first-time user, the consent screen first
 * (every required term must be accepted; the optional ones may be). Used by
 * the host page (the screen over the phone) and by the login window (the
 * screen is the window). The result is what the host sends back to the
 * mini-app: `{ authorizationCode, referrer }` or `{ error: { code, message } }`.
 */
import { api, ApiError } from './api.js';

/**
 * Fills `container` with the consent form for `user` and `terms`; resolves
 * with the tags agreed to, or null when the user cancels (the Cancel button
 * or Escape).
 * @param {HTMLElement} container
 * @param {{ userKey: number, name: string }} user
 * @param {{ tag: string, title: string, required: boolean }[]} terms
 * @param {string} appOrigin
 * @returns {Promise<string[] | null>}
 */
export function askConsent(container, user, terms, appOrigin) {
  const make = (tag, props = {}, children = []) => {
    const element = document.createElement(tag);
    Object.assign(element, props);
    element.append(...children);
    return element;
  };
  const title = make('h2', { id: 'consent-title', textContent: 'Log in with the host app' });
  const intro = make('p', { className: 'consent-intro' }, [
    make('strong', { textContent: user.name }),
    ` (userKey ${user.userKey}) is logging in to the mini-app at `,
    make('span', { className: 'origin', textContent: appOrigin }),
    ' for the first time. Agree to the terms to continue.',
  ]);
  const boxes = terms.map((term) => make('input', { type: 'checkbox', name: 'terms', value: term.tag, required: false, id: `term-${term.tag}` }));
  const all = make('input', { type: 'checkbox', id: 'term-all' });
  const list = make(
    'ul',
    { className: 'terms' },
    terms.map((term, i) =>
      make('li', {}, [
        make('label', { htmlFor: boxes[i].id }, [
          boxes[i],
          make('span', {}, [
            term.title,
            make('span', { className: term.required ? 'required' : 'optional', textContent: term.required ? ' (required)' : ' (optional)' }),
          ]),
        ]),
        make('code', { className: 'tag', textContent: term.tag }),
      ]),
    ),
  );
  const hint = make('p', { id: 'consent-hint', className: 'hint', textContent: 'Accept every required term to continue.' });
  const agree = make('button', { type: 'submit', className: 'primary', textContent: 'Agree and continue', disabled: true });
  agree.setAttribute('aria-describedby', hint.id);
  const cancel = make('button', { type: 'button', className: 'secondary', textContent: 'Cancel' });
  const form = make('form', { className: 'consent', noValidate: true }, [
    title,
    intro,
    make('fieldset', {}, [
      make('legend', { textContent: 'Terms' }),
      make('label', { htmlFor: all.id, className: 'all' }, [all, make('span', { textContent: 'Agree to all' })]),
      list,
    ]),
    hint,
    make('div', { className: 'actions' }, [cancel, agree]),
  ]);
  form.setAttribute('aria-labelledby', title.id);

  const update = () => {
    const missing = terms.filter((term, i) => term.required && !boxes[i].checked);
    agree.disabled = missing.length > 0;
    hint.textContent = missing.length > 0 ? `Accept every required term to continue (${missing.length} left).` : 'Every required term is accepted.';
    const checked = boxes.filter((box) => box.checked).length;
    all.checked = checked === boxes.length;
    all.indeterminate = checked > 0 && checked < boxes.length;
  };
  all.addEventListener('change', () => {
    for (const box of boxes) box.checked = all.checked;
    update();
  });
  for (const box of boxes) box.addEventListener('change', update);
  container.replaceChildren(form);
  update();
  all.focus();

  return new Promise((resolve) => {
    const finish = (value) => {
      container.removeEventListener('keydown', onKey);
      container.replaceChildren();
      resolve(value);
    };
    const onKey = (event) => {
      if (event.key === 'Escape') {
        event.preventDefault();
        finish(null);
      }
    };
    container.addEventListener('keydown', onKey);
    cancel.addEventListener('click', () => finish(null));
    form.addEventListener('submit', (event) => {
      event.preventDefault();
      if (agree.disabled) return;
      finish(boxes.filter((box) => box.checked).map((box) => box.value));
    });
  });
}

/**
 * One appLogin() answered by the host: asks the server for a code, and
 * shows the consent screen (through `consent`) when the user needs one.
 * @param {{ via: 'frame' | 'popup', origin: string }} caller
 * @param {(user: { userKey: number, name: string }, terms: { tag: string, title: string, required: boolean }[]) => Promise<string[] | null>} consent
 */
export async function answerAppLogin(caller, consent) {
  const failed = (error) => {
    if (error instanceof ApiError && error.status === 0)
      return { error: { code: 'NETWORK_ERROR', message: 'a network error interrupted the login: the host cannot reach its server' } };
    if (error instanceof ApiError && error.code === 'ORIGIN_NOT_ALLOWED') return { error: { code: 'NOT_IN_HOST_APP', message: error.message } };
    return { error: { code: 'NETWORK_ERROR', message: `the login service refused the login: ${error.message}` } };
  };
  try {
    let answer = await api('login', caller);
    if (answer.outcome === 'consent') {
      const agreed = await consent(answer.user, answer.terms);
      answer =
        agreed === null
          ? await api('cancel', { ...caller, userKey: answer.user.userKey })
          : await api('login', { ...caller, userKey: answer.user.userKey, agreedTerms: agreed });
    }
    if (answer.outcome === 'rejected') return { error: { code: answer.code, message: answer.message } };
    return { authorizationCode: answer.authorizationCode, referrer: answer.referrer };
  } catch (error) {
    return failed(error);
  }
}
