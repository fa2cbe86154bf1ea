// formats/regex.c — Python-`re` subset -> Thompson NFA -> state-set
// simulation (see regex.h). The parser builds a small tree (sibling lists,
// so only group nesting recurses), the compiler expands it into
// instructions with a hard size limit, the matcher advances every live
// state one character at a time.
#include "formats/regex.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/tokenizer/unicode.h"

#define MAX_DEPTH 64    // group nesting
#define UNBOUNDED (-1)  // a repetition's max

enum { CLS_D = 1, CLS_ND = 2, CLS_W = 4, CLS_NW = 8, CLS_S = 16, CLS_NS = 32 };
enum { N_EMPTY, N_SET, N_ANY, N_ASSERT, N_CAT, N_ALT, N_REP };
enum { I_SET, I_ANY, I_SPLIT, I_JMP, I_ASSERT, I_MATCH };
enum { A_BOL, A_EOL, A_EOS, A_WORDB, A_NWORDB };

typedef struct {
    uint32_t lo, hi;
} crange;

typedef struct {
    int neg;
    unsigned cls; // CLS_* bits
    int r0, nr;   // ranges[r0 .. r0 + nr)
} cset;

typedef struct {
    int kind, arg;      // arg: set index (N_SET) or assertion (N_ASSERT)
    int min, max;       // N_REP
    int child, last;    // first / last child (-1: none)
    int next;           // next sibling
} node;

typedef struct {
    int op, x, y;
} inst;

struct pq_regex {
    inst *prog;
    int nprog;
    cset *sets;
    crange *ranges;
    // the matcher's workspace, nprog entries each
    int *clist, *nlist, *stack;
    uint64_t *mark, gen;
};

typedef struct {
    const char *p;
    size_t n, i;
    node *nodes;
    int nn;
    cset *sets;
    int ns;
    crange *ranges;
    int nr;
    int depth;
    int failed;
} parser;

static int fail(parser *ps, size_t at, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(parser *ps, size_t at, const char *fmt, ...) {
    if (ps->failed) return -1;
    char what[160];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ps->failed = 1;
    PQ_FAIL(PQ_ERR_FORMAT, "regex \"%.*s\": %s at offset %zu", ps->n > 120 ? 120 : (int)ps->n, ps->p, what, at);
    return -1;
}

static int new_node(parser *ps, int kind) {
    node *x = &ps->nodes[ps->nn]; // sized for the worst case in compile
    *x = (node){kind, 0, 0, 0, -1, -1, -1};
    return ps->nn++;
}

static void add_child(parser *ps, int parent, int child) {
    node *p = &ps->nodes[parent];
    if (p->child < 0) p->child = child;
    else ps->nodes[p->last].next = child;
    p->last = child;
}

static int new_set(parser *ps, int neg, unsigned cls) {
    ps->sets[ps->ns] = (cset){neg, cls, ps->nr, 0};
    return ps->ns++;
}

static void add_range(parser *ps, int set, uint32_t lo, uint32_t hi) {
    ps->ranges[ps->nr++] = (crange){lo, hi};
    ps->sets[set].nr++;
}

static int set_node(parser *ps, int set) {
    int x = new_node(ps, N_SET);
    ps->nodes[x].arg = set;
    return x;
}

// The code point at ps->i (advancing past it); -1 on invalid UTF-8.
static int64_t next_cp(parser *ps) {
    uint32_t cp;
    int k = pq_utf8_next(ps->p + ps->i, ps->n - ps->i, &cp);
    if (k <= 0) return fail(ps, ps->i, "invalid UTF-8");
    ps->i += (size_t)k;
    return cp;
}

static int hexval(char c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static int is_alnum(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// After a backslash (ps->i at the escaped character): a class escape sets
// *cls; otherwise the code point is returned. in_set: inside [...], where
// \b is a backspace and assertions do not exist.
static int64_t escape(parser *ps, int in_set, unsigned *cls, int *assertion) {
    size_t at = ps->i - 1;
    *cls = 0;
    *assertion = -1;
    if (ps->i >= ps->n) return fail(ps, at, "bad escape (end of pattern)");
    char c = ps->p[ps->i];
    static const char CLASS_ESC[] = "dDwWsS";
    const char *k = strchr(CLASS_ESC, c);
    if (c && k) {
        static const unsigned BITS[] = {CLS_D, CLS_ND, CLS_W, CLS_NW, CLS_S, CLS_NS};
        ps->i++;
        *cls = BITS[k - CLASS_ESC];
        return 0;
    }
    static const char CTRL[] = "afnrtv";
    static const int CTRL_CP[] = {7, 12, 10, 13, 9, 11};
    if (c && (k = strchr(CTRL, c))) {
        ps->i++;
        return CTRL_CP[k - CTRL];
    }
    if (c == 'b' && in_set) return ps->i++, 8;
    if (!in_set && (c == 'b' || c == 'B' || c == 'A' || c == 'Z')) {
        ps->i++;
        *assertion = c == 'b' ? A_WORDB : c == 'B' ? A_NWORDB : c == 'A' ? A_BOL : A_EOS;
        return 0;
    }
    if (c == 'x') {
        if (ps->i + 2 >= ps->n || hexval(ps->p[ps->i + 1]) < 0 || hexval(ps->p[ps->i + 2]) < 0)
            return fail(ps, at, "incomplete escape \\x");
        int v = hexval(ps->p[ps->i + 1]) * 16 + hexval(ps->p[ps->i + 2]);
        ps->i += 3;
        return v;
    }
    if (c >= '0' && c <= '9') return fail(ps, at, "backreference or octal escape \\%c is not supported", c);
    if (c == 'N' || c == 'u' || c == 'U') return fail(ps, at, "\\%c escapes are not supported", c);
    if (is_alnum(c)) return fail(ps, at, "bad escape \\%c", c);
    return next_cp(ps); // punctuation or a non-ASCII character stands for itself
}

static int parse_alt(parser *ps);

// [...] (ps->i just past '[')
static int parse_set(parser *ps) {
    size_t start = ps->i - 1;
    int neg = ps->i < ps->n && ps->p[ps->i] == '^';
    if (neg) ps->i++;
    int set = new_set(ps, neg, 0);
    for (int first = 1;; first = 0) {
        if (ps->i >= ps->n) return fail(ps, start, "unterminated character set");
        if (ps->p[ps->i] == ']' && !first) {
            ps->i++;
            break;
        }
        size_t item = ps->i;
        unsigned cls = 0;
        int assertion;
        int64_t lo = ps->p[ps->i] == '\\' ? (ps->i++, escape(ps, 1, &cls, &assertion)) : next_cp(ps);
        if (lo < 0) return -1;
        int range = ps->i + 1 < ps->n && ps->p[ps->i] == '-' && ps->p[ps->i + 1] != ']';
        if (cls) {
            if (range) return fail(ps, item, "bad character range");
            ps->sets[set].cls |= cls;
            continue;
        }
        int64_t hi = lo;
        if (range) {
            ps->i++;
            hi = ps->p[ps->i] == '\\' ? (ps->i++, escape(ps, 1, &cls, &assertion)) : next_cp(ps);
            if (hi < 0) return -1;
            if (cls || hi < lo) return fail(ps, item, "bad character range");
        }
        add_range(ps, set, (uint32_t)lo, (uint32_t)hi);
    }
    return set_node(ps, set);
}

// (...) (ps->i just past '(')
static int parse_group(parser *ps) {
    size_t start = ps->i - 1;
    const char *p = ps->p;
    if (ps->i < ps->n && p[ps->i] == '?') {
        char c = ps->i + 1 < ps->n ? p[ps->i + 1] : 0, d = ps->i + 2 < ps->n ? p[ps->i + 2] : 0;
        if (c == ':') {
            ps->i += 2;
        } else if (c == 'P' && d == '<') {
            size_t j = ps->i + 3;
            while (j < ps->n && (is_alnum(p[j]) || p[j] == '_')) j++;
            if (j == ps->i + 3 || j >= ps->n || p[j] != '>' || (p[ps->i + 3] >= '0' && p[ps->i + 3] <= '9'))
                return fail(ps, start, "bad group name");
            ps->i = j + 1;
        } else if (c == '#') {
            const char *end = memchr(p + ps->i, ')', ps->n - ps->i);
            if (!end) return fail(ps, start, "missing ), unterminated comment");
            ps->i = (size_t)(end - p) + 1;
            return new_node(ps, N_EMPTY);
        } else {
            const char *what = c == '=' || c == '!'                  ? "lookahead (?%c...) is not supported"
                               : c == '<' && (d == '=' || d == '!') ? "lookbehind (?<%c...) is not supported"
                               : c == '>'                           ? "atomic group (?%c...) is not supported"
                               : c == '('                           ? "conditional group (?%c...) is not supported"
                               : c == 'P' && d == '='               ? "backreference (?P%c...) is not supported"
                               : (c >= 'a' && c <= 'z') || c == 'L' || c == '-' ? "inline flags (?%c...) are not supported"
                                                                    : "unknown extension (?%c";
            return fail(ps, start, what, c == '<' || (c == 'P' && d == '=') ? d : c ? c : '?');
        }
    }
    if (++ps->depth > MAX_DEPTH) return fail(ps, start, "groups nested more than %d deep", MAX_DEPTH);
    int x = parse_alt(ps);
    if (x < 0) return -1;
    if (ps->i >= ps->n || p[ps->i] != ')') return fail(ps, start, "missing ), unterminated subpattern");
    ps->i++;
    ps->depth--;
    return x;
}

// A {m}, {m,}, {,n}, {m,n} quantifier at ps->i (as Python's sre_parse reads
// one: anything else starting with '{' is a literal brace). Returns its
// length in bytes, or 0 when it is not one.
static size_t quantifier_braces(const parser *ps, long long *min, long long *max) {
    const char *p = ps->p;
    size_t i = ps->i + 1, n = ps->n;
    if (i >= n || p[i] == '}') return 0;
    long long lo = -1, hi = -1; // -1: no digits; large values saturate (and are refused by the caller)
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) lo = lo > 1000000000LL ? lo : (lo < 0 ? 0 : lo) * 10 + (p[i] - '0');
    if (i < n && p[i] == ',') {
        for (i++; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            hi = hi > 1000000000LL ? hi : (hi < 0 ? 0 : hi) * 10 + (p[i] - '0');
    } else {
        hi = lo;
    }
    if (i >= n || p[i] != '}') return 0;
    *min = lo < 0 ? 0 : lo;
    *max = hi < 0 ? UNBOUNDED : hi;
    return i + 1 - ps->i;
}

// A quantifier at ps->i: its bounds and length, or 0.
static size_t quantifier(const parser *ps, long long *min, long long *max) {
    if (ps->i >= ps->n) return 0;
    switch (ps->p[ps->i]) {
    case '*': return *min = 0, *max = UNBOUNDED, 1;
    case '+': return *min = 1, *max = UNBOUNDED, 1;
    case '?': return *min = 0, *max = 1, 1;
    case '{': return quantifier_braces(ps, min, max);
    }
    return 0;
}

static int parse_atom(parser *ps) {
    char c = ps->p[ps->i];
    size_t at = ps->i;
    ps->i++;
    switch (c) {
    case '(': return parse_group(ps);
    case '[': return parse_set(ps);
    case '.': return new_node(ps, N_ANY);
    case '^':
    case '$': {
        int x = new_node(ps, N_ASSERT);
        ps->nodes[x].arg = c == '^' ? A_BOL : A_EOL;
        return x;
    }
    case '\\': {
        unsigned cls;
        int assertion;
        int64_t cp = escape(ps, 0, &cls, &assertion);
        if (cp < 0) return -1;
        if (assertion >= 0) {
            int x = new_node(ps, N_ASSERT);
            ps->nodes[x].arg = assertion;
            return x;
        }
        int set = new_set(ps, 0, cls);
        if (!cls) add_range(ps, set, (uint32_t)cp, (uint32_t)cp);
        return set_node(ps, set);
    }
    default: {
        ps->i = at;
        int64_t cp = next_cp(ps);
        if (cp < 0) return -1;
        int set = new_set(ps, 0, 0);
        add_range(ps, set, (uint32_t)cp, (uint32_t)cp);
        return set_node(ps, set);
    }
    }
}

// An atom and at most one quantifier (optionally lazy).
static int parse_repeat(parser *ps) {
    long long min, max;
    if (quantifier(ps, &min, &max)) return fail(ps, ps->i, "nothing to repeat");
    int atom = parse_atom(ps);
    if (atom < 0) return -1;
    size_t at = ps->i, q = quantifier(ps, &min, &max);
    if (!q) return atom;
    if (ps->nodes[atom].kind == N_ASSERT) return fail(ps, at, "nothing to repeat");
    if (max != UNBOUNDED && max < min) return fail(ps, at, "min repeat greater than max repeat");
    if (min > PQ_REGEX_MAX_PROGRAM || max > PQ_REGEX_MAX_PROGRAM)
        return fail(ps, at, "repetition count %lld is too large", max > min ? max : min);
    ps->i += q;
    if (ps->i < ps->n && ps->p[ps->i] == '?') ps->i++; // lazy: the same yes/no answer
    else if (ps->i < ps->n && ps->p[ps->i] == '+') return fail(ps, ps->i, "possessive quantifier is not supported");
    long long m2, x2;
    if (quantifier(ps, &m2, &x2)) return fail(ps, ps->i, "multiple repeat");
    int rep = new_node(ps, N_REP);
    ps->nodes[rep].min = (int)min;
    ps->nodes[rep].max = (int)max;
    add_child(ps, rep, atom);
    return rep;
}

static int parse_cat(parser *ps) {
    int cat = new_node(ps, N_CAT);
    while (ps->i < ps->n && ps->p[ps->i] != '|' && ps->p[ps->i] != ')') {
        int x = parse_repeat(ps);
        if (x < 0) return -1;
        add_child(ps, cat, x);
    }
    return cat;
}

static int parse_alt(parser *ps) {
    int alt = new_node(ps, N_ALT);
    for (;;) {
        int x = parse_cat(ps);
        if (x < 0) return -1;
        add_child(ps, alt, x);
        if (ps->i >= ps->n || ps->p[ps->i] != '|') break;
        ps->i++;
    }
    return alt;
}

// ---- compiling -------------------------------------------------------------

typedef struct {
    const parser *ps;
    inst *prog;
    int n;
    int failed;
} compiler;

static int emit(compiler *c, int op, int x, int y) {
    if (c->failed) return 0;
    if (c->n >= PQ_REGEX_MAX_PROGRAM) {
        c->failed = 1;
        return 0;
    }
    c->prog[c->n] = (inst){op, x, y};
    return c->n++;
}

static void emit_node(compiler *c, int id) {
    if (c->failed) return;
    const node *x = &c->ps->nodes[id];
    switch (x->kind) {
    case N_EMPTY: return;
    case N_SET: emit(c, I_SET, x->arg, 0); return;
    case N_ANY: emit(c, I_ANY, 0, 0); return;
    case N_ASSERT: emit(c, I_ASSERT, x->arg, 0); return;
    case N_CAT:
        for (int k = x->child; k >= 0 && !c->failed; k = c->ps->nodes[k].next) emit_node(c, k);
        return;
    case N_ALT: {
        // SPLIT(this, next alternative) ... JMP(end), for all but the last
        int first_jmp = -1;
        for (int k = x->child; k >= 0 && !c->failed; k = c->ps->nodes[k].next) {
            if (c->ps->nodes[k].next < 0) {
                emit_node(c, k);
                break;
            }
            int split = emit(c, I_SPLIT, c->n + 1, 0);
            emit_node(c, k);
            int j = emit(c, I_JMP, first_jmp, 0); // chain the jumps through x, patched below
            first_jmp = j;
            c->prog[split].y = c->n;
        }
        for (int j = first_jmp; j >= 0 && !c->failed;) {
            int prev = c->prog[j].x;
            c->prog[j].x = c->n;
            j = prev;
        }
        return;
    }
    case N_REP: {
        for (int i = 0; i < x->min && !c->failed; i++) emit_node(c, x->child);
        if (x->max == UNBOUNDED) {
            int split = emit(c, I_SPLIT, c->n + 1, 0);
            emit_node(c, x->child);
            emit(c, I_JMP, split, 0);
            if (!c->failed) c->prog[split].y = c->n;
            return;
        }
        int first_split = -1;
        for (int i = x->min; i < x->max && !c->failed; i++) { // each optional copy may end the repetition
            int split = emit(c, I_SPLIT, c->n + 1, first_split);
            first_split = split;
            emit_node(c, x->child);
        }
        for (int s = first_split; s >= 0 && !c->failed;) {
            int prev = c->prog[s].y;
            c->prog[s].y = c->n;
            s = prev;
        }
        return;
    }
    }
}

pq_status pq_regex_compile(const char *pattern, size_t len, pq_regex **out) {
    *out = NULL;
    PQ_FAIL_IF(len > PQ_REGEX_MAX_PATTERN, PQ_ERR_FORMAT, "regex \"%.60s...\": %zu bytes, more than the %d allowed",
               pattern, len, PQ_REGEX_MAX_PATTERN);
    // every pattern byte makes at most one set, one range and three nodes
    parser ps = {.p = pattern, .n = len};
    ps.nodes = malloc((3 * len + 4) * sizeof *ps.nodes);
    ps.sets = malloc((len + 1) * sizeof *ps.sets);
    ps.ranges = malloc((len + 1) * sizeof *ps.ranges);
    pq_regex *re = calloc(1, sizeof *re);
    inst *prog = malloc(PQ_REGEX_MAX_PROGRAM * sizeof *prog);
    pq_status st = PQ_OK;
    PQ_CHECK_GOTO(!ps.nodes || !ps.sets || !ps.ranges || !re || !prog, st, PQ_ERR_NOMEM, "out of memory compiling a regex");
    int root = parse_alt(&ps);
    if (root >= 0 && ps.i < ps.n) root = fail(&ps, ps.i, "unbalanced parenthesis");
    if (root < 0) {
        st = PQ_ERR_FORMAT;
        goto done;
    }
    compiler c = {&ps, prog, 0, 0};
    emit_node(&c, root);
    emit(&c, I_MATCH, 0, 0);
    PQ_CHECK_GOTO(c.failed, st, PQ_ERR_FORMAT, "regex \"%.*s\": more than %d instructions once its repetitions are "
                  "expanded", len > 120 ? 120 : (int)len, pattern, PQ_REGEX_MAX_PROGRAM);
    re->nprog = c.n;
    re->prog = realloc(prog, (size_t)c.n * sizeof *prog);
    if (re->prog) prog = NULL;
    re->sets = ps.sets;
    re->ranges = ps.ranges;
    ps.sets = NULL;
    ps.ranges = NULL;
    re->clist = malloc((size_t)c.n * sizeof(int));
    re->nlist = malloc((size_t)c.n * sizeof(int));
    re->stack = malloc((size_t)c.n * sizeof(int));
    re->mark = calloc((size_t)c.n, sizeof(uint64_t));
    PQ_CHECK_GOTO(!re->prog || !re->clist || !re->nlist || !re->stack || !re->mark, st, PQ_ERR_NOMEM,
                  "out of memory compiling a regex");
    *out = re;
    re = NULL;
done:
    pq_regex_free(re);
    free(prog);
    free(ps.nodes);
    free(ps.sets);
    free(ps.ranges);
    return st;
}

int pq_regex_size(const pq_regex *re) { return re->nprog; }

void pq_regex_free(pq_regex *re) {
    if (!re) return;
    free(re->prog);
    free(re->sets);
    free(re->ranges);
    free(re->clist);
    free(re->nlist);
    free(re->stack);
    free(re->mark);
    free(re);
}

// ---- matching --------------------------------------------------------------

static int is_digit(uint32_t cp) { return cp < 128 ? cp >= '0' && cp <= '9' : (pq_uni_class(cp) & PQ_UNI_N) != 0; }
static int is_word(uint32_t cp) {
    return cp < 128 ? is_alnum((char)cp) || cp == '_' : (pq_uni_class(cp) & PQ_UNI_WORD) != 0;
}
static int is_space(uint32_t cp) {
    return cp < 128 ? cp == ' ' || (cp >= 9 && cp <= 13) || (cp >= 0x1c && cp <= 0x1f)
                    : (pq_uni_class(cp) & PQ_UNI_SPACE) != 0;
}

static int set_has(const pq_regex *re, const cset *s, uint32_t cp) {
    int in = ((s->cls & CLS_D) && is_digit(cp)) || ((s->cls & CLS_ND) && !is_digit(cp)) ||
             ((s->cls & CLS_W) && is_word(cp)) || ((s->cls & CLS_NW) && !is_word(cp)) ||
             ((s->cls & CLS_S) && is_space(cp)) || ((s->cls & CLS_NS) && !is_space(cp));
    for (int i = 0; !in && i < s->nr; i++) in = cp >= re->ranges[s->r0 + i].lo && cp <= re->ranges[s->r0 + i].hi;
    return in != s->neg;
}

// The character at s[i] (i < n) and its length; an invalid byte is one
// character that no literal matches.
static uint32_t char_at(const char *s, size_t n, size_t i, size_t *len) {
    uint32_t cp;
    int k = pq_utf8_next(s + i, n - i, &cp);
    *len = k > 0 ? (size_t)k : 1;
    return k > 0 ? cp : 0xDC00u + (unsigned char)s[i]; // a lone surrogate: never a pattern character
}

static uint32_t char_before(const char *s, size_t i) {
    size_t c = i - 1, len;
    while (c > 0 && i - c < 4 && ((unsigned char)s[c] & 0xC0) == 0x80) c--;
    uint32_t cp = char_at(s, i, c, &len);
    return c + len == i ? cp : 0xDC00u + (unsigned char)s[i - 1];
}

static int assertion_holds(int a, const char *s, size_t n, size_t pos) {
    size_t len;
    switch (a) {
    case A_BOL: return pos == 0;
    case A_EOL: return pos == n || (pos + 1 == n && s[pos] == '\n');
    case A_EOS: return pos == n;
    default: {
        int before = pos > 0 && is_word(char_before(s, pos)), after = pos < n && is_word(char_at(s, n, pos, &len));
        return (before != after) == (a == A_WORDB);
    }
    }
}

// Adds pc and every state reachable from it without reading a character to
// list; 1 if that reaches MATCH.
static int add_state(pq_regex *re, int *list, int *nl, int pc, const char *s, size_t n, size_t pos) {
    int sp = 0;
    if (re->mark[pc] == re->gen) return 0;
    re->mark[pc] = re->gen;
    re->stack[sp++] = pc;
    while (sp > 0) {
        const inst *in = &re->prog[re->stack[--sp]];
        int next[2], nn = 0;
        switch (in->op) {
        case I_MATCH: return 1;
        case I_SET:
        case I_ANY: list[(*nl)++] = (int)(in - re->prog); break;
        case I_JMP: next[nn++] = in->x; break;
        case I_SPLIT: next[nn++] = in->x, next[nn++] = in->y; break;
        case I_ASSERT:
            if (assertion_holds(in->x, s, n, pos)) next[nn++] = (int)(in - re->prog) + 1;
            break;
        }
        for (int k = 0; k < nn; k++)
            if (re->mark[next[k]] != re->gen) {
                re->mark[next[k]] = re->gen;
                re->stack[sp++] = next[k];
            }
    }
    return 0;
}

int pq_regex_match(pq_regex *re, const char *s, size_t n) {
    int nc = 0;
    re->gen++;
    if (add_state(re, re->clist, &nc, 0, s, n, 0)) return 1;
    for (size_t pos = 0; pos < n && nc > 0;) {
        size_t len;
        uint32_t cp = char_at(s, n, pos, &len);
        int nn = 0;
        re->gen++;
        for (int k = 0; k < nc; k++) {
            const inst *in = &re->prog[re->clist[k]];
            int ok = in->op == I_ANY ? cp != '\n' : set_has(re, &re->sets[in->x], cp);
            if (ok && add_state(re, re->nlist, &nn, re->clist[k] + 1, s, n, pos + len)) return 1;
        }
        int *t = re->clist;
        re->clist = re->nlist;
        re->nlist = t;
        nc = nn;
        pos += len;
    }
    return 0;
}
