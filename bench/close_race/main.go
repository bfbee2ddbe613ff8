// The client side of bench/close_race.py: a Go net/http client configured as kube-apiserver's
// webhook client (HTTP/1.1 over TLS, keep-alive, POST with a rewindable body) sends requests
// one after another, pausing `pause` plus up to 2 ms after each answer, and prints how they
// ended as one JSON object (answer status or error text -> count).
//
//	close-race URL REQUESTS PAUSE_MS
package main

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

func main() {
	url := os.Args[1]
	n, _ := strconv.Atoi(os.Args[2])
	ms, _ := strconv.Atoi(os.Args[3])
	pause := time.Duration(ms) * time.Millisecond
	transport := &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}},
		IdleConnTimeout: 90 * time.Second, // client-go's
	}
	client := &http.Client{Transport: transport, Timeout: 10 * time.Second}
	body := bytes.Repeat([]byte("x"), 6000) // an AdmissionReview's size: several writes
	counts := map[string]int{}
	for i := 0; i < n; i++ {
		request, _ := http.NewRequest("POST", url, bytes.NewReader(body)) // sets GetBody
		request.Header.Set("Content-Type", "application/json")
		response, err := client.Do(request)
		if err != nil {
			counts[strings.TrimPrefix(err.Error(), "Post \""+url+"\": ")]++
		} else {
			io.Copy(io.Discard, response.Body)
			response.Body.Close()
			counts[strconv.Itoa(response.StatusCode)]++
		}
		time.Sleep(pause + time.Duration(rand.Intn(2000))*time.Microsecond)
	}
	out, _ := json.Marshal(counts)
	fmt.Println(string(out))
}
