package main

// The ctf.kopc.io/v1alpha1 types the peer reads and writes, as
// config/crd/bases defines them; hand-written (what controller-gen would
// generate). Fields the benchmark's definition does not use are kept as
// they are in the CRD so the objects decode.

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
)

var GroupVersion = schema.GroupVersion{Group: "ctf.kopc.io", Version: "v1alpha1"}

type PodDef struct {
	Name     string         `json:"name"`
	Replicas *int32         `json:"replicas,omitempty"`
	Template corev1.PodSpec `json:"template"`
}

type Expose struct {
	Name string `json:"name"`
	Pod  string `json:"pod"`
	Port int32  `json:"port"`
	Type string `json:"type,omitempty"`
}

type SecretRef struct {
	Name string `json:"name"`
	Key  string `json:"key,omitempty"`
}

type DynamicFlag struct {
	SecretRef SecretRef `json:"secretRef"`
	Prefix    string    `json:"prefix,omitempty"`
	Suffix    string    `json:"suffix,omitempty"`
}

type Flag struct {
	Static  string       `json:"static,omitempty"`
	Dynamic *DynamicFlag `json:"dynamic,omitempty"`
}

type Lifetime struct {
	Default string `json:"default,omitempty"`
	Max     string `json:"max,omitempty"`
	RenewBy string `json:"renewBy,omitempty"`
}

type Network struct {
	Egress string `json:"egress,omitempty"`
}

type Security struct {
	ReadOnlyRootFilesystem bool   `json:"readOnlyRootFilesystem,omitempty"`
	RuntimeClassName       string `json:"runtimeClassName,omitempty"`
}

type ChallengeDefinitionSpec struct {
	Title        string                        `json:"title,omitempty"`
	Category     string                        `json:"category,omitempty"`
	Description  string                        `json:"description,omitempty"`
	Points       int64                         `json:"points,omitempty"`
	Pods         []PodDef                      `json:"pods,omitempty"`
	Expose       []Expose                      `json:"expose,omitempty"`
	Flag         *Flag                         `json:"flag,omitempty"`
	Lifetime     *Lifetime                     `json:"lifetime,omitempty"`
	StartTimeout string                        `json:"startTimeout,omitempty"`
	Network      *Network                      `json:"network,omitempty"`
	Security     *Security                     `json:"security,omitempty"`
	Resources    map[string]intstr.IntOrString `json:"resources,omitempty"`
}

type ChallengeDefinition struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ChallengeDefinitionSpec `json:"spec,omitempty"`
}

type ChallengeDefinitionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ChallengeDefinition `json:"items"`
}

type ChallengeSpec struct {
	Definition string `json:"definition"`
	Team       string `json:"team"`
	ExpiresAt  string `json:"expiresAt,omitempty"`
}

type Endpoint struct {
	Name    string `json:"name"`
	Type    string `json:"type,omitempty"`
	Address string `json:"address,omitempty"`
}

type ChallengeStatus struct {
	CurrentStatus      string             `json:"currentStatus,omitempty"`
	Reason             string             `json:"reason,omitempty"`
	Message            string             `json:"message,omitempty"`
	Namespace          string             `json:"namespace,omitempty"`
	Endpoints          []Endpoint         `json:"endpoints"`
	StartedAt          string             `json:"startedAt,omitempty"`
	ExpiresAt          string             `json:"expiresAt,omitempty"`
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
}

type Challenge struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              ChallengeSpec   `json:"spec,omitempty"`
	Status            ChallengeStatus `json:"status,omitempty"`
}

type ChallengeList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Challenge `json:"items"`
}

// ---- deep copies ------------------------------------------------------------

func (in *ChallengeDefinitionSpec) DeepCopyInto(out *ChallengeDefinitionSpec) {
	*out = *in
	if in.Pods != nil {
		out.Pods = make([]PodDef, len(in.Pods))
		for i := range in.Pods {
			out.Pods[i] = in.Pods[i]
			if in.Pods[i].Replicas != nil {
				r := *in.Pods[i].Replicas
				out.Pods[i].Replicas = &r
			}
			in.Pods[i].Template.DeepCopyInto(&out.Pods[i].Template)
		}
	}
	if in.Expose != nil {
		out.Expose = append([]Expose(nil), in.Expose...)
	}
	if in.Flag != nil {
		f := *in.Flag
		if in.Flag.Dynamic != nil {
			d := *in.Flag.Dynamic
			f.Dynamic = &d
		}
		out.Flag = &f
	}
	if in.Lifetime != nil {
		l := *in.Lifetime
		out.Lifetime = &l
	}
	if in.Network != nil {
		n := *in.Network
		out.Network = &n
	}
	if in.Security != nil {
		s := *in.Security
		out.Security = &s
	}
	if in.Resources != nil {
		out.Resources = make(map[string]intstr.IntOrString, len(in.Resources))
		for k, v := range in.Resources {
			out.Resources[k] = v
		}
	}
}

func (in *ChallengeDefinition) DeepCopyInto(out *ChallengeDefinition) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Spec.DeepCopyInto(&out.Spec)
}

func (in *ChallengeDefinition) DeepCopy() *ChallengeDefinition {
	if in == nil {
		return nil
	}
	out := new(ChallengeDefinition)
	in.DeepCopyInto(out)
	return out
}

func (in *ChallengeDefinition) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *ChallengeDefinitionList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(ChallengeDefinitionList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]ChallengeDefinition, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func (in *ChallengeStatus) DeepCopyInto(out *ChallengeStatus) {
	*out = *in
	if in.Endpoints != nil {
		out.Endpoints = append([]Endpoint(nil), in.Endpoints...)
	}
	if in.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(in.Conditions))
		for i := range in.Conditions {
			in.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

func (in *Challenge) DeepCopyInto(out *Challenge) {
	*out = *in
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	in.Status.DeepCopyInto(&out.Status)
}

func (in *Challenge) DeepCopy() *Challenge {
	if in == nil {
		return nil
	}
	out := new(Challenge)
	in.DeepCopyInto(out)
	return out
}

func (in *Challenge) DeepCopyObject() runtime.Object { return in.DeepCopy() }

func (in *ChallengeList) DeepCopyObject() runtime.Object {
	if in == nil {
		return nil
	}
	out := new(ChallengeList)
	*out = *in
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Challenge, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

func addToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Challenge{}, &ChallengeList{}, &ChallengeDefinition{},
		&ChallengeDefinitionList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
