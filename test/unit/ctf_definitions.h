/*
 * ctf_definitions.h - what the tests of the CTF core's instance builder share
 * (test_ctf_names.c, test_ctf_definition.c, test_ctf_flag.c, test_ctf_pod.c,
 * test_ctf_instance.c, test_ctf_instance_warm.c, test_ctf_pool.c): sample
 * ChallengeDefinitions (three, and two with a warm pool), a Challenge, the two
 * exposure configurations, and helpers to build an instance's children and
 * look into them. Include after <cmocka.h>.
 *
 * Fixtures are JSON written with single quotes (parse() in ctf_fixture.h
 * turns them into double quotes) so that the definitions read as they would
 * in YAML.
 */
#ifndef CTF_DEFINITIONS_H
#define CTF_DEFINITIONS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctf_fixture.h"
#include "core/instance.h"

static inline void assert_json_eq(const json_t *got, const char *want_text, const char *what)
{
    json_t *want = parse(want_text);
    if (!json_equal(got, want)) {
        char *g = json_dumps(got, JSON_SORT_KEYS | JSON_COMPACT);
        char *w = json_dumps(want, JSON_SORT_KEYS | JSON_COMPACT);
        fail_msg("%s:\n got %s\nwant %s", what, g, w);
    }
    json_decref(want);
}

/* One pod, one TCP exposure, a static flag: the classic pwn challenge. */
static const char DEF_TCP[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'pwn','namespace':'ctf'},"
    "'spec':{'title':'Baby pwn','category':'pwn','points':100,"
    "'pods':[{'name':'app','template':{'containers':[{'name':'app',"
    "'image':'registry.example/pwn:1','ports':[{'containerPort':1337}]}]}}],"
    "'expose':[{'name':'pwn','pod':'app','port':1337,'type':'TCP'}],"
    "'flag':{'static':'flag{static_one}'}}}";

/* One pod over HTTP, a dynamic flag, internet egress, every security option. */
static const char DEF_HTTP[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'web','namespace':'ctf'},"
    "'spec':{'title':'Web','pods':[{'name':'web','replicas':2,'template':{'containers':[{"
    "'name':'web','image':'registry.example/web:1','ports':[{'containerPort':8080}],"
    "'env':[{'name':'MODE','value':'ctf'},{'name':'FLAG','value':'not-the-flag'}]}]}}],"
    "'expose':[{'name':'web','pod':'web','port':8080,'type':'HTTP'}],"
    "'flag':{'dynamic':{'secretRef':{'name':'ctf-flag-key'}}},"
    "'lifetime':{'default':'30m','max':'2h','renewBy':'30m'},'startTimeout':'5m',"
    "'network':{'egress':'Internet'},"
    "'security':{'readOnlyRootFilesystem':true,'runtimeClassName':'gvisor'},"
    "'resources':{'cpu':'2','memory':'2Gi'}}}";

/*
 * Two pods: web (an initContainer and a sidecar, NET_BIND_SERVICE, exposed
 * twice) and db (its own uid, an Unconfined seccomp profile to replace).
 */
static const char DEF_TWO[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'shop','namespace':'ctf'},"
    "'spec':{'title':'Shop','pods':["
    "{'name':'web','template':{"
    "'initContainers':[{'name':'init','image':'busybox:1',"
    "'securityContext':{'capabilities':{'add':['NET_BIND_SERVICE']}}}],"
    "'containers':[{'name':'web','image':'registry.example/shop:1',"
    "'ports':[{'containerPort':80},{'containerPort':2222}],"
    "'securityContext':{'capabilities':{'add':['NET_BIND_SERVICE'],'drop':['NET_RAW']}}},"
    "{'name':'proxy','image':'registry.example/proxy:1',"
    "'resources':{'limits':{'cpu':'100m','memory':'32Mi'}},"
    "'volumeMounts':[{'name':'cache','mountPath':'/cache'}]}],"
    "'volumes':[{'name':'cache','emptyDir':{}}]}},"
    "{'name':'db','replicas':1,'template':{"
    "'securityContext':{'runAsUser':999,'fsGroup':999},"
    "'containers':[{'name':'db','image':'postgres:16','ports':[{'containerPort':5432}],"
    "'securityContext':{'seccompProfile':{'type':'Unconfined'}}}]}}],"
    "'expose':[{'name':'web','pod':'web','port':80,'type':'HTTP'},"
    "{'name':'admin','pod':'db','port':5432},"
    "{'name':'ssh','pod':'web','port':2222,'type':'TCP'}],"
    "'flag':{'static':'flag{two_pods}'}}}";

static const char CHAL[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'Challenge',"
    "'metadata':{'name':'shop-team1','namespace':'ctf','uid':'uid-123'},"
    "'spec':{'definition':'shop','team':'team1'}}";

/* A dynamic flag, HTTP, and a template that sets a FLAG of its own. */
static const char DEF_WEB[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'web','namespace':'ctf'},"
    "'spec':{'title':'Web','pods':[{'name':'web','template':{'containers':[{"
    "'name':'web','image':'registry.example/web:1','ports':[{'containerPort':8080}],"
    "'env':[{'name':'FLAG','value':'not-the-flag'}]}]}}],"
    "'expose':[{'name':'web','pod':'web','port':8080,'type':'HTTP'}],"
    "'flag':{'dynamic':{'secretRef':{'name':'ctf-flag-key'}}},"
    "'pool':{'min':2,'max':6,'autoscale':true}}}";

/* A static flag, TCP. */
static const char DEF_NC[] =
    "{'apiVersion':'ctf.kopc.io/v1alpha1','kind':'ChallengeDefinition',"
    "'metadata':{'name':'nc','namespace':'ctf'},"
    "'spec':{'title':'nc','pods':[{'name':'app','template':{'containers':[{"
    "'name':'app','image':'registry.example/nc:1','ports':[{'containerPort':1337}]}]}}],"
    "'expose':[{'name':'nc','pod':'app','port':1337,'type':'TCP'}],"
    "'flag':{'static':'flag{same_for_all}'},'pool':{'min':3}}}";

static const char CHAL_WEB[] = "{'metadata':{'name':'web-team1','namespace':'ctf','uid':'uid-1'},"
                               "'spec':{'definition':'web','team':'team1'}}";

/* The identifier of the warm instance in the pool tests. */
static const char ID[] = "0123456789";

static const ctf_config NODEPORT_CFG = {.node_address = "10.0.0.5"};
static const ctf_config INGRESS_CFG = {.ingress_domain = "ctf.example.com",
                                       .node_address = "10.0.0.5",
                                       .ingress_class = "nginx"};

/* challenge_for returns CHAL for another definition. */
static inline json_t *challenge_for(const char *definition)
{
    json_t *c = parse(CHAL);
    json_object_set_new(json_object_get(c, "spec"), "definition", json_string(definition));
    return c;
}

/* build builds the children of def_text for CHAL (definition renamed to match). */
static inline json_t *build(const ctf_config *cfg, const char *def_text, const char *flag)
{
    json_t *def = parse(def_text);
    json_t *chal = challenge_for(json_string_value(json_object_get(
        json_object_get(def, "metadata"), "name")));
    json_t *out = NULL;
    kop_status st;
    kop_err err = ctf_build_children(cfg, def, chal, flag, &out, &st);
    if (err)
        fail_msg("build: %s: %s", kop_strerror(err), st.message);
    json_decref(def);
    json_decref(chal);
    return out;
}

/* find returns the child of that kind and name, borrowed; absent fails the test. */
static inline json_t *find(const json_t *children, const char *kind, const char *name)
{
    json_t *o = child_of(children, kind, name);
    if (!o)
        fail_msg("no %s %s", kind, name);
    return o;
}

/* at returns the value at a dotted path ("spec.template.spec.containers.0"), borrowed. */
static inline json_t *at(const json_t *v, const char *path)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok && v;
         tok = strtok_r(NULL, ".", &save)) {
        if (json_is_array(v))
            v = json_array_get(v, strtoul(tok, NULL, 10));
        else
            v = json_object_get(v, tok);
    }
    return (json_t *)v;
}

/*
 * mutate sets the value at path (creating objects on the way) to the JSON
 * value_text, or removes it when value_text is NULL.
 */
static inline void mutate(json_t *doc, const char *path, const char *value_text)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    char *last = strrchr(buf, '.');
    json_t *parent = doc;
    if (last) {
        *last++ = '\0';
        for (char *save = NULL, *tok = strtok_r(buf, ".", &save); tok;
             tok = strtok_r(NULL, ".", &save)) {
            json_t *next = json_is_array(parent) ? json_array_get(parent, strtoul(tok, NULL, 10))
                                                 : json_object_get(parent, tok);
            if (!next) {
                next = json_object();
                json_object_set_new(parent, tok, next);
            }
            parent = next;
        }
    } else {
        last = buf;
    }
    if (json_is_array(parent)) {
        size_t i = strtoul(last, NULL, 10);
        if (value_text)
            json_array_set_new(parent, i, parse(value_text));
        else
            json_array_remove(parent, i);
    } else if (value_text) {
        json_object_set_new(parent, last, parse(value_text));
    } else {
        json_object_del(parent, last);
    }
}

#endif /* CTF_DEFINITIONS_H */
