/*
 * resources.c - the resources the CTF operator touches: its two custom
 * resources and the kinds of an instance it caches or writes, one table
 * every layer names them by (declared in resources.h). Constant data, but
 * for the version ChallengeDefinitions are read at, set once at start-up.
 */
#include "controller/resources.h"

const kop_resource CTF_CHALLENGES = {"ctf.kopc.io", "v1alpha1", "challenges", "Challenge", true};
/* Read at v1beta1 when the apiserver serves it: ctf_choose_versions (setup.c). */
kop_resource CTF_DEFINITIONS = {"ctf.kopc.io", "v1alpha1", "challengedefinitions",
                                "ChallengeDefinition", true};
const kop_resource CTF_NAMESPACES = {"", "v1", "namespaces", "Namespace", false};
const kop_resource CTF_DEPLOYMENTS = {"apps", "v1", "deployments", "Deployment", true};
const kop_resource CTF_PODS = {"", "v1", "pods", "Pod", true};
const kop_resource CTF_SERVICES = {"", "v1", "services", "Service", true};
const kop_resource CTF_SECRETS = {"", "v1", "secrets", "Secret", true};
const kop_resource CTF_ENDPOINTSLICES = {"discovery.k8s.io", "v1", "endpointslices",
                                         "EndpointSlice", true};
const kop_resource CTF_NETWORKPOLICIES = {"networking.k8s.io", "v1", "networkpolicies",
                                          "NetworkPolicy", true};
/* The gateway mode's routes (core/gateway.h), as Gateway API v1.6 serves and stores them. */
const kop_resource CTF_TLSROUTES = {"gateway.networking.k8s.io", "v1", "tlsroutes", "TLSRoute",
                                    true};
const kop_resource CTF_HTTPROUTES = {"gateway.networking.k8s.io", "v1", "httproutes",
                                     "HTTPRoute", true};
