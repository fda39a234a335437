/*
 * kopgen.h - kop-gen, the generator of libkop operators: its parts, shared
 * by the tool (main.c), its unit test and its fuzz target.
 *
 * The CRD is the source of truth. kop-gen reads it (YAML, with libfyaml,
 * into a jansson tree: yaml.c), takes the structural schema of one of its
 * versions apart into a tree of fields (crd.c), and writes from it:
 *   - a C header with the kop_resource and typed, validated accessors of
 *     spec and status (header.c);
 *   - the files of a new operator project around it (scaffold.c).
 *
 * Everything read from the CRD reaches generated C only through the
 * escaping functions of header.c, and only identifiers that crd.c checked
 * are pasted as code: a hostile CRD gets an error, never injected code.
 * Caps bound what a CRD may hold (KOPGEN_*_MAX), so the generator's memory
 * and output stay small whatever it is fed.
 */
#ifndef KOPGEN_H
#define KOPGEN_H

#include <stdbool.h>
#include <stdio.h>

#include <jansson.h>

#include "kop/err.h"

#define KOPGEN_INPUT_MAX  (4u << 20) /* bytes of CRD YAML */
#define KOPGEN_NODES_MAX  100000     /* YAML nodes, aliases expanded */
#define KOPGEN_DEPTH_MAX  24         /* nested objects and arrays (libfyaml stops at 64 levels) */
#define KOPGEN_FIELDS_MAX 2000       /* fields of one version's schema */
#define KOPGEN_NAME_MAX   63         /* a property name (and so a C identifier part) */
#define KOPGEN_IDENT_MAX  200        /* a generated C identifier */

typedef enum kopgen_type {
    KOPGEN_ANY = 0, /* preserve-unknown-fields or int-or-string: a json_t */
    KOPGEN_OBJECT,
    KOPGEN_MAP, /* additionalProperties: a json_t object */
    KOPGEN_ARRAY,
    KOPGEN_STRING,
    KOPGEN_INTEGER,
    KOPGEN_NUMBER,
    KOPGEN_BOOLEAN,
} kopgen_type;

/*
 * kopgen_field: one node of a structural schema. Strings and JSON values
 * are owned by the field; kopgen_crd_free frees the whole tree.
 */
typedef struct kopgen_field {
    char *name;        /* the JSON property name ("" for an array's items) */
    char *path;        /* dotted, from the object root: "spec.tls.secretName" */
    char *ident;       /* snake_case C name from the root: "spec_tls_secret_name" */
    char *description; /* or NULL */
    kopgen_type type;
    char *format;      /* or NULL */
    bool required;     /* listed in its parent's required */
    bool nullable;
    json_t *def;       /* default, or NULL */
    json_t *enums;     /* array of allowed values, or NULL */
    bool has_min, has_max, excl_min, excl_max;
    double min, max;
    long long min_len, max_len; /* -1: no bound (strings) */
    long long min_items, max_items; /* -1: no bound (arrays) */
    char *pattern;     /* or NULL */
    bool pattern_checked; /* the pattern is also a POSIX ERE: setters check it */
    struct kopgen_field *items;  /* KOPGEN_ARRAY: the element */
    struct kopgen_field **props; /* KOPGEN_OBJECT: properties, in schema order */
    size_t nprops;
} kopgen_field;

/* kopgen_crd: what kop-gen needs of a CRD, for one version. */
typedef struct kopgen_crd {
    char *group, *version, *plural, *singular, *kind;
    bool namespaced;
    bool status_subresource;
    char *prefix;           /* snake_case kind: the C prefix, "website" */
    char *upper;            /* upper-case prefix: "WEBSITE" */
    kopgen_field *root;     /* the version's openAPIV3Schema */
    const kopgen_field *spec, *status; /* borrowed from root; either may be NULL */
    json_t *doc;            /* the CRD as JSON */
} kopgen_crd;

/*
 * kopgen_yaml_to_json converts the first YAML document of text[0..len) to
 * JSON (YAML 1.2 core schema: plain null, true/false, integers and floats
 * become JSON scalars, everything quoted or else is a string; aliases are
 * expanded under KOPGEN_NODES_MAX; mapping keys must be scalars). *out is
 * owned. KOP_EPARSE or KOP_ETOOBIG, explained in st with the line where
 * libfyaml says.
 */
kop_err kopgen_yaml_to_json(const char *text, size_t len, const char *origin, json_t **out,
                            kop_status *st);

/*
 * kopgen_crd_parse reads a CustomResourceDefinition (apiextensions.k8s.io/v1)
 * from YAML or JSON text and takes apart the schema of version (NULL: the
 * storage version). *out is owned: kopgen_crd_free. On a CRD kop-gen cannot
 * use (not a CRD, a name that makes no C identifier, a type it does not
 * know, a default or enum of the wrong type, a cap exceeded) it returns
 * KOP_EINVAL (or KOP_EPARSE, KOP_ETOOBIG) and st names the field and why.
 */
kop_err kopgen_crd_parse(const char *text, size_t len, const char *origin, const char *version,
                         kopgen_crd **out, kop_status *st);

/* kopgen_crd_free frees crd and its fields. NULL is ok. */
void kopgen_crd_free(kopgen_crd *crd);

/* kopgen_crd_count_fields returns how many fields the tree under f holds, f included. */
size_t kopgen_count_fields(const kopgen_field *f);

/*
 * kopgen_write_header writes the C header of crd to f; source names the CRD
 * file in the header's first line. KOP_EIO when a write fails.
 */
kop_err kopgen_write_header(FILE *f, const kopgen_crd *crd, const char *source, kop_status *st);

/* kopgen_owned: a kind the operator's controller owns (creates, watches). */
typedef struct kopgen_owned {
    char group[64], version[32], plural[64], kind[64];
    char ident[KOPGEN_NAME_MAX + 1]; /* snake_case kind: "config_map" */
} kopgen_owned;

/*
 * kopgen_owned_parse reads an --owns value: a kind kop-gen knows
 * ("ConfigMap", "Deployment", "Secret", ...) or "group/version/plural/Kind"
 * ("version/plural/Kind" for the core group). KOP_EINVAL, explained in st.
 */
kop_err kopgen_owned_parse(const char *s, kopgen_owned *out, kop_status *st);

/* kopgen_owned_format writes the canonical spelling of o (what PROJECT keeps). */
void kopgen_owned_format(const kopgen_owned *o, char *buf, size_t size);

#define KOPGEN_OWNS_MAX 16

/* kopgen_project: a project directory and what it is generated from. */
typedef struct kopgen_project {
    const char *dir;      /* the project's root */
    const char *name;     /* the operator's name: binary, image, Deployment */
    const char *crd_path; /* the CRD, relative to dir */
    const char *version;  /* the CRD version the code is for; NULL: the storage one */
    const kopgen_crd *crd;
    kopgen_owned owns[KOPGEN_OWNS_MAX];
    size_t nowns;
} kopgen_project;

/*
 * kopgen_scaffold writes the project's files under p->dir. Generated files
 * (the types header, the project header, the RBAC role, PROJECT) are
 * rewritten every time, but only over a file kop-gen wrote (it carries the
 * "generated by kop-gen" line); scaffolded files (main.c, the reconciler,
 * CMakeLists.txt, Dockerfile, manifests, the e2e script) are written only
 * when absent, so hand edits are never lost. Each file written is named on
 * log (may be NULL). KOP_EIO or KOP_EINVAL, explained in st.
 */
kop_err kopgen_scaffold(const kopgen_project *p, FILE *log, kop_status *st);

/*
 * kopgen_project_read reads DIR/PROJECT, written by kopgen_scaffold, into
 * p (whose dir the caller set): name, crd_path and version (in one block,
 * *strings, that the caller frees) and the owned kinds. KOP_EIO, KOP_EINVAL.
 */
kop_err kopgen_project_read(kopgen_project *p, char **strings, kop_status *st);

/*
 * kopgen_snake writes the snake_case form of a camelCase name into out
 * ("observedGeneration" -> "observed_generation", "podIPs" -> "pod_ips",
 * '-' and '.' become '_'). false when the name has another character than
 * [A-Za-z0-9_.-], does not start with a letter, or does not fit.
 */
bool kopgen_snake(const char *name, char *out, size_t size);

#endif /* KOPGEN_H */
