/* chat_tpl.c — the Jinja subset of chat templates (chat_tpl.h, docs/SERVER.md "Chat templates"): a
 * lexer (with trim_blocks, lstrip_blocks and the "-" markers), a recursive-descent parser into nodes
 * and an interpreter whose strings remember, piece by piece, whether their bytes came from the template
 * or from a message. Everything is allocated in one arena, freed at the end of a render. */
#define _POSIX_C_SOURCE 200809L
#include "chat_tpl.h"

#include <ctype.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rt_file.h"

/* ---- arena, errors ---- */

typedef struct Blk {
    struct Blk *next;
    size_t used, cap;
    _Alignas(16) unsigned char mem[];
} Blk;

typedef struct R {
    Blk *blk;
    jmp_buf fail;
    int code;
    char *err;
    size_t errlen;
} R;

static void die(R *r, int code, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = line > 0 ? snprintf(r->err, r->errlen, "chat template line %d: ", line) : 0;
    if (n < 0 || (size_t)n >= r->errlen) n = 0;
    vsnprintf(r->err + n, r->errlen - (size_t)n, fmt, ap);
    va_end(ap);
    for (char *c = r->err; *c; c++) /* one line: a template's own message may hold control bytes */
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    r->code = code;
    longjmp(r->fail, 1);
}

static void *alloc(R *r, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (!r->blk || r->blk->used + n > r->blk->cap) {
        size_t cap = n > 65536 ? n : 65536;
        Blk *b = malloc(sizeof *b + cap);
        if (!b) die(r, CT_ERR_NOMEM, 0, "out of memory");
        b->next = r->blk, b->used = 0, b->cap = cap, r->blk = b;
    }
    void *p = r->blk->mem + r->blk->used;
    r->blk->used += n;
    memset(p, 0, n);
    return p;
}

static char *dupn(R *r, const char *s, size_t n)
{
    char *d = alloc(r, n + 1);
    memcpy(d, s, n);
    return d;
}

/* ---- lexer ---- */

enum { T_TEXT, T_NAME, T_STR, T_INT, T_OP, T_OUT, T_STMT, T_END, T_EOF };

typedef struct Tok {
    int k, line;
    const char *s; /* T_TEXT, T_NAME, T_OP, T_STR (decoded) */
    size_t n;
    long long v;
} Tok;

typedef struct Lex {
    R *r;
    Tok *t;
    int n, cap;
} Lex;

static Tok *push(Lex *lx, int k, int line, const char *s, size_t n)
{
    if (lx->n == lx->cap) {
        int cap = lx->cap ? 2 * lx->cap : 256;
        Tok *t = alloc(lx->r, (size_t)cap * sizeof *t);
        if (lx->n) memcpy(t, lx->t, (size_t)lx->n * sizeof *t);
        lx->t = t, lx->cap = cap;
    }
    Tok *t = &lx->t[lx->n++];
    *t = (Tok){k, line, s, n, 0};
    return t;
}

static void lex(R *r, const char *src, Lex *lx)
{
    size_t p = 0, len = strlen(src);
    int line = 1, strip_next = 0, trim_next = 0;
    while (p <= len) {
        /* text up to the next tag */
        size_t q = p;
        while (q < len && !(src[q] == '{' && (src[q + 1] == '{' || src[q + 1] == '%' || src[q + 1] == '#')))
            q++;
        size_t a = p, b = q;
        if (strip_next)
            while (a < b && isspace((unsigned char)src[a]))
                a++;
        else if (trim_next && a < b && src[a] == '\n')
            a++;
        else if (trim_next && a + 1 < b && src[a] == '\r' && src[a + 1] == '\n')
            a += 2;
        int tag = q < len ? src[q + 1] : 0, minus = q + 2 < len && src[q + 2] == '-';
        int plus = q + 2 < len && src[q + 2] == '+';
        if (minus) {
            while (b > a && isspace((unsigned char)src[b - 1]))
                b--;
        } else if ((tag == '%' || tag == '#') && !plus) { /* lstrip_blocks: the line's indent before it */
            size_t c = b;
            while (c > a && (src[c - 1] == ' ' || src[c - 1] == '\t'))
                c--;
            if (c == 0 || src[c - 1] == '\n') b = c;
        }
        if (b > a) push(lx, T_TEXT, line, src + a, b - a);
        for (size_t i = p; i < q; i++)
            line += src[i] == '\n';
        if (q >= len) break;
        p = q + 2 + (minus || plus);
        strip_next = trim_next = 0;
        if (tag == '#') {
            const char *e = strstr(src + p, "#}");
            if (!e) die(r, CT_ERR_TEMPLATE, line, "a comment is not closed");
            for (const char *c = src + p; c < e; c++)
                line += *c == '\n';
            strip_next = e > src + p && e[-1] == '-';
            trim_next = !strip_next;
            p = (size_t)(e - src) + 2;
            continue;
        }
        push(lx, tag == '{' ? T_OUT : T_STMT, line, NULL, 0);
        const char close = tag == '{' ? '}' : '%';
        for (;;) {
            while (p < len && isspace((unsigned char)src[p]))
                line += src[p++] == '\n';
            if (p >= len) die(r, CT_ERR_TEMPLATE, line, "a tag is not closed");
            if ((src[p] == '-' && src[p + 1] == close && src[p + 2] == '}') ||
                (src[p] == close && src[p + 1] == '}')) {
                strip_next = src[p] == '-';
                trim_next = !strip_next && tag == '%';
                p += strip_next ? 3 : 2;
                push(lx, T_END, line, NULL, 0);
                break;
            }
            char c = src[p];
            if (isalpha((unsigned char)c) || c == '_') {
                size_t s = p;
                while (p < len && (isalnum((unsigned char)src[p]) || src[p] == '_'))
                    p++;
                push(lx, T_NAME, line, src + s, p - s);
            } else if (isdigit((unsigned char)c)) {
                Tok *t = push(lx, T_INT, line, NULL, 0);
                while (p < len && isdigit((unsigned char)src[p])) {
                    if (t->v > (LLONG_MAX - 9) / 10)
                        die(r, CT_ERR_TEMPLATE, line, "an integer literal too large");
                    t->v = t->v * 10 + (src[p++] - '0');
                }
            } else if (c == '\'' || c == '"') {
                char *out = alloc(r, len - p + 1);
                size_t n = 0;
                for (p++; p < len && src[p] != c; p++) {
                    if (src[p] == '\\' && p + 1 < len) {
                        char e = src[++p];
                        out[n++] = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
                    } else {
                        line += src[p] == '\n';
                        out[n++] = src[p];
                    }
                }
                if (p >= len) die(r, CT_ERR_TEMPLATE, line, "a string is not closed");
                p++;
                push(lx, T_STR, line, out, n);
            } else {
                static const char *const two[] = {"==", "!=", "<=", ">=", "//", "**"};
                size_t n = 1;
                for (int i = 0; i < 6; i++)
                    if (!strncmp(src + p, two[i], 2)) n = 2;
                if (n == 1 && !strchr("+-*/%~()[]{}.,:|<>=", c))
                    die(r, CT_ERR_TEMPLATE, line, "unexpected character '%c'", c);
                push(lx, T_OP, line, src + p, n);
                p += n;
            }
        }
    }
    push(lx, T_EOF, line, NULL, 0);
}

/* ---- values ---- */

enum { V_UNDEF, V_NONE, V_BOOL, V_INT, V_STR, V_LIST, V_MSG, V_LOOP };

typedef struct Piece {
    const char *s;
    size_t n;
    int tpl; /* from the template */
} Piece;

typedef struct Val {
    int k;
    long long i;        /* V_BOOL, V_INT */
    Piece *p;           /* V_STR: pieces */
    int np;             /* V_STR: pieces; V_LIST: items */
    struct Val *items;  /* V_LIST */
    const CtMsg *msg;   /* V_MSG */
    long long idx, len; /* V_LOOP */
} Val;

static Val str_of(R *r, const char *s, size_t n, int tpl)
{
    Val v = {.k = V_STR, .np = 1};
    v.p = alloc(r, sizeof *v.p);
    v.p[0] = (Piece){s, n, tpl};
    return v;
}

/* The bytes of a string value (arena). */
static char *flat(R *r, const Val *v, size_t *n)
{
    size_t len = 0;
    for (int i = 0; i < v->np; i++)
        len += v->p[i].n;
    char *s = alloc(r, len + 1);
    for (int i = 0, at = 0; i < v->np; at += (int)v->p[i].n, i++)
        memcpy(s + at, v->p[i].s, v->p[i].n);
    if (n) *n = len;
    return s;
}

static Val concat(R *r, Val a, Val b)
{
    Val v = {.k = V_STR, .np = a.np + b.np};
    v.p = alloc(r, (size_t)(v.np ? v.np : 1) * sizeof *v.p);
    if (a.np) memcpy(v.p, a.p, (size_t)a.np * sizeof *v.p);
    if (b.np) memcpy(v.p + a.np, b.p, (size_t)b.np * sizeof *v.p);
    return v;
}

static Val to_str(R *r, Val v)
{
    char buf[32];
    switch (v.k) {
    case V_STR: return v;
    case V_UNDEF: return str_of(r, "", 0, 1);
    case V_NONE: return str_of(r, "None", 4, 1);
    case V_BOOL: return v.i ? str_of(r, "True", 4, 1) : str_of(r, "False", 5, 1);
    case V_INT:
        snprintf(buf, sizeof buf, "%lld", v.i);
        return str_of(r, dupn(r, buf, strlen(buf)), strlen(buf), 1);
    default: return str_of(r, "", 0, 1);
    }
}

static int truthy(const Val *v)
{
    switch (v->k) {
    case V_BOOL:
    case V_INT: return v->i != 0;
    case V_STR:
        for (int i = 0; i < v->np; i++)
            if (v->p[i].n) return 1;
        return 0;
    case V_LIST: return v->np > 0;
    case V_MSG:
    case V_LOOP: return 1;
    default: return 0;
    }
}

/* Strips whitespace at the ends of a string value, across its pieces (which: 1 left, 2 right, 3 both). */
static Val strip(R *r, Val v, int which)
{
    Val o = v;
    o.p = alloc(r, (size_t)(v.np ? v.np : 1) * sizeof *o.p);
    memcpy(o.p, v.p, (size_t)v.np * sizeof *o.p);
    for (int i = 0; (which & 1) && i < o.np; i++) {
        while (o.p[i].n && isspace((unsigned char)o.p[i].s[0]))
            o.p[i].s++, o.p[i].n--;
        if (o.p[i].n) break;
    }
    for (int i = o.np - 1; (which & 2) && i >= 0; i--) {
        while (o.p[i].n && isspace((unsigned char)o.p[i].s[o.p[i].n - 1]))
            o.p[i].n--;
        if (o.p[i].n) break;
    }
    return o;
}

static Val recase(R *r, Val v, int upper)
{
    Val o = v;
    o.p = alloc(r, (size_t)(v.np ? v.np : 1) * sizeof *o.p);
    for (int i = 0; i < v.np; i++) {
        char *s = dupn(r, v.p[i].s, v.p[i].n);
        for (size_t k = 0; k < v.p[i].n; k++)
            s[k] = (char)(upper ? toupper((unsigned char)s[k]) : tolower((unsigned char)s[k]));
        o.p[i] = (Piece){s, v.p[i].n, v.p[i].tpl};
    }
    return o;
}

static int equal(R *r, const Val *a, const Val *b)
{
    int an = a->k == V_BOOL || a->k == V_INT, bn = b->k == V_BOOL || b->k == V_INT;
    if (an && bn) return a->i == b->i;
    if (a->k == V_STR && b->k == V_STR) {
        size_t x, y;
        char *s = flat(r, a, &x), *t = flat(r, b, &y);
        return x == y && !memcmp(s, t, x);
    }
    if (a->k == V_NONE || a->k == V_UNDEF) return b->k == a->k;
    if (a->k == V_MSG && b->k == V_MSG) return a->msg == b->msg;
    return 0;
}

/* ---- parser: expressions into nodes ---- */

enum { E_LIT, E_VAR, E_ATTR, E_ITEM, E_SLICE, E_CALL, E_FILTER, E_TEST, E_BIN, E_NOT, E_NEG, E_COND, E_LIST };

typedef struct Expr {
    int k, line;
    const char *name; /* E_VAR, E_ATTR, E_FILTER, E_TEST, E_BIN (the operator) */
    size_t nlen;
    Val lit;
    struct Expr *a, *b, *c; /* operands; E_CALL: a the callee; E_SLICE: a[b:c] */
    struct Expr **args;
    int nargs, neg; /* E_TEST: "is not" */
} Expr;

typedef struct P {
    R *r;
    Tok *t;
    int at, depth; /* nesting of expressions and blocks: a hostile template cannot exhaust the stack */
} P;

enum { MAX_DEPTH = 200 };

static Tok *peek(P *p)
{
    return &p->t[p->at];
}

static int is_op(P *p, const char *op)
{
    Tok *t = peek(p);
    return t->k == T_OP && t->n == strlen(op) && !memcmp(t->s, op, t->n);
}

static int is_name(P *p, const char *w)
{
    Tok *t = peek(p);
    return t->k == T_NAME && t->n == strlen(w) && !memcmp(t->s, w, t->n);
}

static void expect_op(P *p, const char *op)
{
    if (!is_op(p, op)) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "expected '%s'", op);
    p->at++;
}

static Expr *node(P *p, int k)
{
    Expr *e = alloc(p->r, sizeof *e);
    e->k = k, e->line = peek(p)->line;
    return e;
}

static Expr *expr(P *p);

static void call_args(P *p, Expr *e)
{
    Expr *args[16];
    int n = 0;
    expect_op(p, "(");
    while (!is_op(p, ")")) {
        if (n == 16) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "more than 16 arguments");
        if (peek(p)->k == T_NAME && p->t[p->at + 1].k == T_OP && p->t[p->at + 1].n == 1 &&
            p->t[p->at + 1].s[0] == '=')
            die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "keyword arguments are not in kiln's subset");
        args[n++] = expr(p);
        if (!is_op(p, ")")) expect_op(p, ",");
    }
    p->at++;
    e->args = alloc(p->r, (size_t)(n ? n : 1) * sizeof *e->args);
    memcpy(e->args, args, (size_t)n * sizeof *args);
    e->nargs = n;
}

static Expr *primary(P *p)
{
    Tok *t = peek(p);
    Expr *e;
    if (t->k == T_STR || t->k == T_INT) {
        e = node(p, E_LIT);
        e->lit = t->k == T_INT ? (Val){.k = V_INT, .i = t->v} : str_of(p->r, t->s, t->n, 1);
        p->at++;
    } else if (t->k == T_NAME) {
        e = node(p, E_LIT);
        if (is_name(p, "true") || is_name(p, "True") || is_name(p, "false") || is_name(p, "False"))
            e->lit = (Val){.k = V_BOOL, .i = t->s[0] == 't' || t->s[0] == 'T'};
        else if (is_name(p, "none") || is_name(p, "None"))
            e->lit = (Val){.k = V_NONE};
        else
            e->k = E_VAR, e->name = t->s, e->nlen = t->n;
        p->at++;
    } else if (is_op(p, "(")) {
        p->at++;
        e = expr(p);
        expect_op(p, ")");
    } else if (is_op(p, "[")) {
        e = node(p, E_LIST);
        p->at++;
        Expr *items[64];
        int n = 0;
        while (!is_op(p, "]")) {
            if (n == 64) die(p->r, CT_ERR_TEMPLATE, t->line, "a list literal of more than 64 items");
            items[n++] = expr(p);
            if (!is_op(p, "]")) expect_op(p, ",");
        }
        p->at++;
        e->args = alloc(p->r, (size_t)(n ? n : 1) * sizeof *e->args);
        memcpy(e->args, items, (size_t)n * sizeof *items);
        e->nargs = n;
    } else {
        die(p->r, CT_ERR_TEMPLATE, t->line, "unexpected %s in an expression",
            t->k == T_END  ? "end of tag"
            : t->k == T_OP ? "operator"
                           : "token");
        return NULL;
    }
    for (;;) { /* postfix: .name, [index], [a:b], (args) */
        if (is_op(p, ".")) {
            p->at++;
            if (peek(p)->k != T_NAME) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "expected a name after '.'");
            Expr *a = node(p, E_ATTR);
            a->a = e, a->name = peek(p)->s, a->nlen = peek(p)->n;
            p->at++;
            e = a;
        } else if (is_op(p, "[")) {
            p->at++;
            Expr *a = node(p, E_ITEM);
            a->a = e;
            if (!is_op(p, ":")) a->b = expr(p);
            if (is_op(p, ":")) {
                p->at++;
                a->k = E_SLICE;
                if (!is_op(p, "]")) a->c = expr(p);
            }
            expect_op(p, "]");
            e = a;
        } else if (is_op(p, "(")) {
            Expr *a = node(p, E_CALL);
            a->a = e;
            call_args(p, a);
            e = a;
        } else {
            return e;
        }
    }
}

static Expr *unary(P *p)
{
    if (is_op(p, "-")) {
        if (++p->depth > MAX_DEPTH)
            die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "nested more than %d deep", MAX_DEPTH);
        Expr *e = node(p, E_NEG);
        p->at++;
        e->a = unary(p);
        p->depth--;
        return e;
    }
    Expr *e = primary(p);
    for (;;) { /* filters and tests */
        if (is_op(p, "|")) {
            p->at++;
            if (peek(p)->k != T_NAME) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "expected a filter name");
            Expr *f = node(p, E_FILTER);
            f->a = e, f->name = peek(p)->s, f->nlen = peek(p)->n;
            p->at++;
            if (is_op(p, "(")) call_args(p, f);
            e = f;
        } else if (is_name(p, "is")) {
            p->at++;
            Expr *f = node(p, E_TEST);
            if (is_name(p, "not")) f->neg = 1, p->at++;
            if (peek(p)->k != T_NAME) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "expected a test name");
            f->a = e, f->name = peek(p)->s, f->nlen = peek(p)->n;
            p->at++;
            e = f;
        } else {
            return e;
        }
    }
}

static Expr *bin(P *p, Expr *a, const char *op, Expr *(*next)(P *))
{
    Expr *e = node(p, E_BIN);
    p->at++;
    e->name = op, e->a = a, e->b = next(p);
    return e;
}

static Expr *math2(P *p)
{
    Expr *e = unary(p);
    while (is_op(p, "*") || is_op(p, "/") || is_op(p, "%") || is_op(p, "//"))
        e = bin(p, e, is_op(p, "*") ? "*" : is_op(p, "%") ? "%" : "/", unary);
    return e;
}

static Expr *concat_e(P *p)
{
    Expr *e = math2(p);
    while (is_op(p, "~"))
        e = bin(p, e, "~", math2);
    return e;
}

static Expr *math1(P *p)
{
    Expr *e = concat_e(p);
    while (is_op(p, "+") || is_op(p, "-"))
        e = bin(p, e, is_op(p, "+") ? "+" : "-", concat_e);
    return e;
}

static Expr *compare(P *p)
{
    Expr *e = math1(p);
    static const char *const ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    for (;;) {
        int k = -1;
        for (int i = 0; i < 6 && k < 0; i++)
            if (is_op(p, ops[i])) k = i;
        if (k >= 0) {
            e = bin(p, e, ops[k], math1);
        } else if (is_name(p, "in")) {
            e = bin(p, e, "in", math1);
        } else if (is_name(p, "not") && p->t[p->at + 1].k == T_NAME && p->t[p->at + 1].n == 2 &&
                   !memcmp(p->t[p->at + 1].s, "in", 2)) {
            p->at++;
            Expr *n = node(p, E_NOT);
            n->a = bin(p, e, "in", math1);
            e = n;
        } else {
            return e;
        }
    }
}

static Expr *not_e(P *p)
{
    if (is_name(p, "not")) {
        if (++p->depth > MAX_DEPTH)
            die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "nested more than %d deep", MAX_DEPTH);
        Expr *e = node(p, E_NOT);
        p->at++;
        e->a = not_e(p);
        p->depth--;
        return e;
    }
    return compare(p);
}

static Expr *and_e(P *p)
{
    Expr *e = not_e(p);
    while (is_name(p, "and"))
        e = bin(p, e, "and", not_e);
    return e;
}

static Expr *or_e(P *p)
{
    Expr *e = and_e(p);
    while (is_name(p, "or"))
        e = bin(p, e, "or", and_e);
    return e;
}

static Expr *expr(P *p)
{
    if (++p->depth > MAX_DEPTH)
        die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "nested more than %d deep", MAX_DEPTH);
    Expr *e = or_e(p);
    p->depth--;
    if (is_name(p, "if")) { /* a if cond else b */
        p->depth++;
        Expr *c = node(p, E_COND);
        p->at++;
        c->a = e, c->b = or_e(p);
        if (is_name(p, "else")) {
            p->at++;
            c->c = expr(p);
        }
        p->depth--;
        return c;
    }
    return e;
}

/* ---- parser: statements ---- */

enum { S_TEXT, S_OUT, S_IF, S_FOR, S_SET };

typedef struct Stmt {
    int k, line;
    const char *text; /* S_TEXT */
    size_t n;
    Expr *e;         /* S_OUT, S_IF (condition), S_FOR (iterable), S_SET */
    const char *var; /* S_FOR, S_SET */
    size_t vlen;
    struct Stmt *body;   /* S_IF: the true branch; S_FOR */
    struct Stmt *orelse; /* S_IF: elif/else chain; S_FOR: else */
    struct Stmt *next;
    int elif; /* S_IF: an elif of the one before (its orelse) */
} Stmt;

static int at_stmt(P *p, const char *word)
{
    return peek(p)->k == T_STMT && p->t[p->at + 1].k == T_NAME && p->t[p->at + 1].n == strlen(word) &&
           !memcmp(p->t[p->at + 1].s, word, p->t[p->at + 1].n);
}

static void end_tag(P *p)
{
    if (peek(p)->k != T_END) die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "expected the end of the tag");
    p->at++;
}

/* Statements until one of the stop words' tags (not consumed) or the end. */
static Stmt *block(P *p, const char *const *stops, int nstops)
{
    Stmt *head = NULL, **tail = &head;
    if (++p->depth > MAX_DEPTH)
        die(p->r, CT_ERR_TEMPLATE, peek(p)->line, "nested more than %d deep", MAX_DEPTH);
    for (;;) {
        Tok *t = peek(p);
        for (int i = 0; i < nstops; i++)
            if (at_stmt(p, stops[i])) return p->depth--, head;
        if (t->k == T_EOF) {
            if (nstops) die(p->r, CT_ERR_TEMPLATE, t->line, "'%s' is missing", stops[nstops - 1]);
            return p->depth--, head;
        }
        Stmt *s = alloc(p->r, sizeof *s);
        s->line = t->line;
        if (t->k == T_TEXT) {
            s->k = S_TEXT, s->text = t->s, s->n = t->n;
            p->at++;
        } else if (t->k == T_OUT) {
            p->at++;
            s->k = S_OUT, s->e = expr(p);
            end_tag(p);
        } else if (at_stmt(p, "if")) {
            p->at += 2;
            s->k = S_IF, s->e = expr(p);
            end_tag(p);
            static const char *const stop[] = {"elif", "else", "endif"};
            s->body = block(p, stop, 3);
            Stmt *cur = s;
            while (at_stmt(p, "elif")) {
                p->at += 2;
                Stmt *e = alloc(p->r, sizeof *e);
                e->k = S_IF, e->elif = 1, e->line = peek(p)->line, e->e = expr(p);
                end_tag(p);
                e->body = block(p, stop, 3);
                cur->orelse = e, cur = e;
            }
            if (at_stmt(p, "else")) {
                p->at += 2;
                end_tag(p);
                static const char *const endif[] = {"endif"};
                cur->orelse = block(p, endif, 1);
            }
            p->at += 2;
            end_tag(p);
        } else if (at_stmt(p, "for")) {
            p->at += 2;
            s->k = S_FOR;
            if (peek(p)->k != T_NAME) die(p->r, CT_ERR_TEMPLATE, s->line, "expected a loop variable");
            s->var = peek(p)->s, s->vlen = peek(p)->n;
            p->at++;
            if (!is_name(p, "in"))
                die(p->r, CT_ERR_TEMPLATE, s->line, "a for loop of one variable only, then 'in'");
            p->at++;
            s->e = or_e(p);
            if (is_name(p, "if"))
                die(p->r, CT_ERR_TEMPLATE, s->line, "loop filters are not in kiln's subset");
            end_tag(p);
            static const char *const stop[] = {"else", "endfor"};
            s->body = block(p, stop, 2);
            if (at_stmt(p, "else")) {
                p->at += 2;
                end_tag(p);
                static const char *const endfor[] = {"endfor"};
                s->orelse = block(p, endfor, 1);
            }
            p->at += 2;
            end_tag(p);
        } else if (at_stmt(p, "set")) {
            p->at += 2;
            s->k = S_SET;
            if (peek(p)->k != T_NAME || p->t[p->at + 1].k != T_OP || p->t[p->at + 1].n != 1 ||
                p->t[p->at + 1].s[0] != '=')
                die(p->r, CT_ERR_TEMPLATE, s->line, "only 'set name = expression' is in kiln's subset");
            s->var = peek(p)->s, s->vlen = peek(p)->n;
            p->at += 2;
            s->e = expr(p);
            end_tag(p);
        } else if (t->k == T_STMT && p->t[p->at + 1].k == T_NAME) {
            die(p->r, CT_ERR_TEMPLATE, t->line, "'%.*s' is not in kiln's subset of Jinja",
                (int)p->t[p->at + 1].n, p->t[p->at + 1].s);
        } else {
            die(p->r, CT_ERR_TEMPLATE, t->line, "unexpected tag");
        }
        *tail = s, tail = &s->next;
    }
}

/* ---- interpreter ---- */

typedef struct Var {
    const char *name;
    size_t n;
    Val v;
    struct Var *next;
} Var;

typedef struct Ctx {
    R *r;
    Var *scope[64]; /* the innermost last */
    int depth;
    CtOut *out;
} Ctx;

static int name_is(const char *s, size_t n, const char *w)
{
    return n == strlen(w) && !memcmp(s, w, n);
}

static Val *lookup(Ctx *c, const char *s, size_t n)
{
    for (int d = c->depth - 1; d >= 0; d--)
        for (Var *v = c->scope[d]; v; v = v->next)
            if (v->n == n && !memcmp(v->name, s, n)) return &v->v;
    return NULL;
}

static void assign(Ctx *c, const char *s, size_t n, Val v)
{
    for (Var *x = c->scope[c->depth - 1]; x; x = x->next)
        if (x->n == n && !memcmp(x->name, s, n)) {
            x->v = v;
            return;
        }
    Var *x = alloc(c->r, sizeof *x);
    *x = (Var){s, n, v, c->scope[c->depth - 1]};
    c->scope[c->depth - 1] = x;
}

static Val eval(Ctx *c, Expr *e);

static Val attr(Ctx *c, Val o, const char *name, size_t n, int line)
{
    if (o.k == V_MSG) {
        if (name_is(name, n, "role")) return str_of(c->r, o.msg->role, strlen(o.msg->role), 0);
        if (name_is(name, n, "content")) return str_of(c->r, o.msg->content, strlen(o.msg->content), 0);
        return (Val){.k = V_UNDEF};
    }
    if (o.k == V_LOOP) {
        if (name_is(name, n, "index")) return (Val){.k = V_INT, .i = o.idx + 1};
        if (name_is(name, n, "index0")) return (Val){.k = V_INT, .i = o.idx};
        if (name_is(name, n, "first")) return (Val){.k = V_BOOL, .i = o.idx == 0};
        if (name_is(name, n, "last")) return (Val){.k = V_BOOL, .i = o.idx == o.len - 1};
        if (name_is(name, n, "length")) return (Val){.k = V_INT, .i = o.len};
        if (name_is(name, n, "revindex")) return (Val){.k = V_INT, .i = o.len - o.idx};
        if (name_is(name, n, "revindex0")) return (Val){.k = V_INT, .i = o.len - o.idx - 1};
        die(c->r, CT_ERR_TEMPLATE, line, "loop.%.*s is not in kiln's subset", (int)n, name);
    }
    return (Val){.k = V_UNDEF};
}

static Val method(Ctx *c, Val o, const char *name, size_t n, Expr *call)
{
    Val a0 = call->nargs ? eval(c, call->args[0]) : (Val){0};
    if (o.k == V_STR) {
        if (name_is(name, n, "strip") && !call->nargs) return strip(c->r, o, 3);
        if (name_is(name, n, "lstrip") && !call->nargs) return strip(c->r, o, 1);
        if (name_is(name, n, "rstrip") && !call->nargs) return strip(c->r, o, 2);
        if (name_is(name, n, "upper")) return recase(c->r, o, 1);
        if (name_is(name, n, "lower")) return recase(c->r, o, 0);
        if ((name_is(name, n, "startswith") || name_is(name, n, "endswith")) && call->nargs == 1 &&
            a0.k == V_STR) {
            size_t x, y;
            char *s = flat(c->r, &o, &x), *t = flat(c->r, &a0, &y);
            int ok = y <= x && !memcmp(name[0] == 's' ? s : s + x - y, t, y);
            return (Val){.k = V_BOOL, .i = ok};
        }
    }
    die(c->r, CT_ERR_TEMPLATE, call->line, "the method '%.*s' is not in kiln's subset", (int)n, name);
    return (Val){0};
}

static Val filter(Ctx *c, Expr *e)
{
    Val v = eval(c, e->a);
    const char *f = e->name;
    size_t n = e->nlen;
    if (name_is(f, n, "trim")) return strip(c->r, to_str(c->r, v), 3);
    if (name_is(f, n, "upper") || name_is(f, n, "lower")) return recase(c->r, to_str(c->r, v), f[0] == 'u');
    if (name_is(f, n, "string")) return to_str(c->r, v);
    if (name_is(f, n, "length") || name_is(f, n, "count")) {
        size_t len = 0;
        if (v.k == V_STR) flat(c->r, &v, &len);
        return (Val){.k = V_INT, .i = v.k == V_LIST ? v.np : (long long)len};
    }
    if ((name_is(f, n, "first") || name_is(f, n, "last")) && v.k == V_LIST)
        return v.np ? v.items[f[0] == 'f' ? 0 : v.np - 1] : (Val){.k = V_UNDEF};
    if (name_is(f, n, "default")) return v.k == V_UNDEF && e->nargs ? eval(c, e->args[0]) : v;
    die(c->r, CT_ERR_TEMPLATE, e->line, "the filter '%.*s' is not in kiln's subset", (int)n, f);
    return v;
}

static long long num(Ctx *c, Val v, int line)
{
    if (v.k != V_INT && v.k != V_BOOL) die(c->r, CT_ERR_TEMPLATE, line, "arithmetic on a non-number");
    return v.i;
}

static Val eval(Ctx *c, Expr *e)
{
    R *r = c->r;
    switch (e->k) {
    case E_LIT: return e->lit;
    case E_VAR: {
        Val *v = lookup(c, e->name, e->nlen);
        return v ? *v : (Val){.k = V_UNDEF};
    }
    case E_ATTR: return attr(c, eval(c, e->a), e->name, e->nlen, e->line);
    case E_ITEM: {
        Val o = eval(c, e->a), i = eval(c, e->b);
        if (o.k == V_LIST && i.k == V_INT) {
            long long k = i.i < 0 ? i.i + o.np : i.i;
            if (k < 0 || k >= o.np) die(r, CT_ERR_TEMPLATE, e->line, "list index %lld out of range", i.i);
            return o.items[k];
        }
        if (i.k == V_STR) {
            size_t n;
            char *key = flat(r, &i, &n);
            return attr(c, o, key, n, e->line);
        }
        return (Val){.k = V_UNDEF};
    }
    case E_SLICE: {
        Val o = eval(c, e->a);
        if (o.k != V_LIST) die(r, CT_ERR_TEMPLATE, e->line, "slicing is in kiln's subset for lists only");
        long long a = e->b ? num(c, eval(c, e->b), e->line) : 0,
                  b = e->c ? num(c, eval(c, e->c), e->line) : o.np;
        a = a < 0 ? a + o.np : a, b = b < 0 ? b + o.np : b;
        a = a < 0 ? 0 : a > o.np ? o.np : a, b = b < a ? a : b > o.np ? o.np : b;
        Val v = {.k = V_LIST, .np = (int)(b - a), .items = o.items + a};
        return v;
    }
    case E_CALL: {
        if (e->a->k == E_ATTR) return method(c, eval(c, e->a->a), e->a->name, e->a->nlen, e);
        if (e->a->k == E_VAR && name_is(e->a->name, e->a->nlen, "raise_exception")) {
            Val m = e->nargs ? to_str(r, eval(c, e->args[0])) : str_of(r, "", 0, 1);
            size_t n;
            char *s = flat(r, &m, &n);
            die(r, CT_ERR_REFUSED, 0, "the model's chat template refuses the conversation: %s", s);
        }
        die(r, CT_ERR_TEMPLATE, e->line, "the function '%.*s' is not in kiln's subset",
            e->a->k == E_VAR ? (int)e->a->nlen : 1, e->a->k == E_VAR ? e->a->name : "?");
        return (Val){0};
    }
    case E_FILTER: return filter(c, e);
    case E_TEST: {
        Val v = eval(c, e->a);
        const char *t = e->name;
        size_t n = e->nlen;
        int ok = 0;
        if (name_is(t, n, "defined"))
            ok = v.k != V_UNDEF;
        else if (name_is(t, n, "undefined"))
            ok = v.k == V_UNDEF;
        else if (name_is(t, n, "none"))
            ok = v.k == V_NONE;
        else if (name_is(t, n, "string"))
            ok = v.k == V_STR;
        else if (name_is(t, n, "number") || name_is(t, n, "integer"))
            ok = v.k == V_INT;
        else if (name_is(t, n, "boolean"))
            ok = v.k == V_BOOL;
        else if (name_is(t, n, "mapping"))
            ok = v.k == V_MSG;
        else if (name_is(t, n, "iterable") || name_is(t, n, "sequence"))
            ok = v.k == V_LIST || v.k == V_STR;
        else if (name_is(t, n, "true") || name_is(t, n, "false"))
            ok = v.k == V_BOOL && v.i == (t[0] == 't');
        else
            die(r, CT_ERR_TEMPLATE, e->line, "the test '%.*s' is not in kiln's subset", (int)n, t);
        return (Val){.k = V_BOOL, .i = ok != e->neg};
    }
    case E_NOT: {
        Val x = eval(c, e->a);
        return (Val){.k = V_BOOL, .i = !truthy(&x)};
    }
    case E_NEG: {
        long long x = num(c, eval(c, e->a), e->line);
        if (x == LLONG_MIN) die(r, CT_ERR_TEMPLATE, e->line, "integer overflow");
        return (Val){.k = V_INT, .i = -x};
    }
    case E_COND: {
        Val cond = eval(c, e->b);
        return truthy(&cond) ? eval(c, e->a) : e->c ? eval(c, e->c) : (Val){.k = V_UNDEF};
    }
    case E_LIST: {
        Val v = {.k = V_LIST, .np = e->nargs};
        v.items = alloc(r, (size_t)(e->nargs ? e->nargs : 1) * sizeof *v.items);
        for (int i = 0; i < e->nargs; i++)
            v.items[i] = eval(c, e->args[i]);
        return v;
    }
    default: break;
    }
    /* E_BIN */
    const char *op = e->name;
    if (!strcmp(op, "and") || !strcmp(op, "or")) {
        Val a = eval(c, e->a);
        if (truthy(&a) == !strcmp(op, "or")) return a;
        return eval(c, e->b);
    }
    Val a = eval(c, e->a), b = eval(c, e->b);
    if (!strcmp(op, "~")) return concat(r, to_str(r, a), to_str(r, b));
    if (!strcmp(op, "+") && a.k == V_STR && b.k == V_STR) return concat(r, a, b);
    if (!strcmp(op, "+") && a.k == V_LIST && b.k == V_LIST) {
        Val v = {.k = V_LIST, .np = a.np + b.np};
        v.items = alloc(r, (size_t)(v.np ? v.np : 1) * sizeof *v.items);
        memcpy(v.items, a.items, (size_t)a.np * sizeof *v.items),
            memcpy(v.items + a.np, b.items, (size_t)b.np * sizeof *v.items);
        return v;
    }
    if (!strcmp(op, "==")) return (Val){.k = V_BOOL, .i = equal(r, &a, &b)};
    if (!strcmp(op, "!=")) return (Val){.k = V_BOOL, .i = !equal(r, &a, &b)};
    if (!strcmp(op, "in")) {
        int found = 0;
        if (b.k == V_LIST)
            for (int i = 0; i < b.np && !found; i++)
                found = equal(r, &a, &b.items[i]);
        else if (b.k == V_STR && a.k == V_STR) {
            size_t x, y;
            char *s = flat(r, &b, &x), *t = flat(r, &a, &y);
            for (size_t i = 0; i + y <= x && !found; i++)
                found = !memcmp(s + i, t, y);
        } else if (b.k == V_MSG && a.k == V_STR) {
            size_t y;
            char *t = flat(r, &a, &y);
            found = name_is(t, y, "role") || name_is(t, y, "content");
        }
        return (Val){.k = V_BOOL, .i = found};
    }
    long long x = num(c, a, e->line), y = num(c, b, e->line);
    if (!strcmp(op, "<")) return (Val){.k = V_BOOL, .i = x < y};
    if (!strcmp(op, ">")) return (Val){.k = V_BOOL, .i = x > y};
    if (!strcmp(op, "<=")) return (Val){.k = V_BOOL, .i = x <= y};
    if (!strcmp(op, ">=")) return (Val){.k = V_BOOL, .i = x >= y};
    long long z = 0;
    int over = !strcmp(op, "+")   ? __builtin_add_overflow(x, y, &z)
               : !strcmp(op, "-") ? __builtin_sub_overflow(x, y, &z)
               : !strcmp(op, "*") ? __builtin_mul_overflow(x, y, &z)
                                  : (x == LLONG_MIN && y == -1);
    if (over) die(r, CT_ERR_TEMPLATE, e->line, "integer overflow");
    if (!strcmp(op, "+") || !strcmp(op, "-") || !strcmp(op, "*")) return (Val){.k = V_INT, .i = z};
    if (!y) die(r, CT_ERR_TEMPLATE, e->line, "division by zero");
    if (!strcmp(op, "%")) { /* Python's: the sign of y (m and y of opposite signs: no overflow) */
        long long m = x % y;
        return (Val){.k = V_INT, .i = m && (m < 0) != (y < 0) ? m + y : m};
    }
    if ((x % y) && (x < 0) != (y < 0)) return (Val){.k = V_INT, .i = x / y - 1}; /* Python's floor */
    return (Val){.k = V_INT, .i = x / y};
}

static void emit(Ctx *c, const char *s, size_t n, int tpl)
{
    CtOut *o = c->out;
    if (o->len + n + 1 > o->cap) {
        size_t cap = (o->len + n + 1) * 2;
        char *t = realloc(o->text, cap);
        unsigned char *m = t ? realloc(o->marks, cap) : NULL;
        if (t) o->text = t;
        if (!t || !m) die(c->r, CT_ERR_NOMEM, 0, "out of memory");
        o->marks = m, o->cap = cap;
    }
    memcpy(o->text + o->len, s, n);
    memset(o->marks + o->len, tpl, n);
    o->len += n;
    o->text[o->len] = 0;
}

static void run(Ctx *c, Stmt *s)
{
    for (; s; s = s->next) {
        switch (s->k) {
        case S_TEXT: emit(c, s->text, s->n, 1); break;
        case S_OUT: {
            Val v = to_str(c->r, eval(c, s->e));
            for (int i = 0; i < v.np; i++)
                emit(c, v.p[i].s, v.p[i].n, v.p[i].tpl);
            break;
        }
        case S_IF:
            for (Stmt *b = s;;) {
                Val v = eval(c, b->e);
                if (truthy(&v)) {
                    run(c, b->body);
                    break;
                }
                if (b->orelse && b->orelse->elif) {
                    b = b->orelse;
                    continue;
                }
                run(c, b->orelse); /* the else block, or nothing */
                break;
            }
            break;
        case S_FOR: {
            Val it = eval(c, s->e);
            if (it.k != V_LIST && it.k != V_UNDEF)
                die(c->r, CT_ERR_TEMPLATE, s->line, "a for loop over a non-list");
            if (it.k == V_UNDEF || !it.np) {
                run(c, s->orelse);
                break;
            }
            if (c->depth == 64) die(c->r, CT_ERR_TEMPLATE, s->line, "loops nested too deep");
            for (int i = 0; i < it.np; i++) {
                c->scope[c->depth++] = NULL;
                assign(c, s->var, s->vlen, it.items[i]);
                assign(c, "loop", 4, (Val){.k = V_LOOP, .idx = i, .len = it.np});
                run(c, s->body);
                c->depth--;
            }
            break;
        }
        case S_SET: assign(c, s->var, s->vlen, eval(c, s->e)); break;
        }
    }
}

int ct_render(const char *tpl, const CtMsg *msgs, int n, const char *bos, const char *eos, int add_generation,
              CtOut *out, char *err, size_t errlen)
{
    R r = {.err = err, .errlen = errlen};
    memset(out, 0, sizeof *out);
    volatile int code = CT_OK;
    if (setjmp(r.fail)) {
        code = r.code;
    } else {
        Lex lx = {.r = &r};
        lex(&r, tpl, &lx);
        P p = {.r = &r, .t = lx.t};
        Stmt *prog = block(&p, NULL, 0);
        Ctx c = {.r = &r, .depth = 1, .out = out};
        Val list = {.k = V_LIST, .np = n};
        list.items = alloc(&r, (size_t)(n ? n : 1) * sizeof *list.items);
        for (int i = 0; i < n; i++)
            list.items[i] = (Val){.k = V_MSG, .msg = &msgs[i]};
        assign(&c, "messages", 8, list);
        assign(&c, "bos_token", 9, str_of(&r, bos ? bos : "", bos ? strlen(bos) : 0, 1));
        assign(&c, "eos_token", 9, str_of(&r, eos ? eos : "", eos ? strlen(eos) : 0, 1));
        assign(&c, "add_generation_prompt", 21, (Val){.k = V_BOOL, .i = add_generation != 0});
        emit(&c, "", 0, 1);
        run(&c, prog);
    }
    while (r.blk) {
        Blk *b = r.blk->next;
        free(r.blk);
        r.blk = b;
    }
    if (code != CT_OK) ct_out_free(out);
    return code;
}

void ct_out_free(CtOut *o)
{
    free(o->text), free(o->marks);
    memset(o, 0, sizeof *o);
}

char *ct_read_file(const char *file, char *err, size_t errlen)
{
    unsigned char *map = NULL;
    size_t n = 0;
    char why[512];
    if (rt_file_map(file, "chat template", &map, &n, why, sizeof why) != KILN_OK) {
        snprintf(err, errlen, "%s", why);
        return NULL;
    }
    char *t = n <= CT_MAX_FILE ? malloc(n + 1) : NULL;
    if (t) memcpy(t, map, n), t[n] = 0;
    rt_file_unmap(map, n);
    if (!t)
        snprintf(err, errlen, "%s: %s", file,
                 n > CT_MAX_FILE ? "a chat template over 1 MiB" : "out of memory");
    return t;
}
